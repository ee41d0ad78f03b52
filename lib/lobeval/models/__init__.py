"""The model client every model role goes through (configuration from the environment, retries, caching, budgets, token counts), the batch API, and the fake OpenAI-compatible endpoint the tests play.

May import: lobeval.core, lobeval.workspace.
"""
