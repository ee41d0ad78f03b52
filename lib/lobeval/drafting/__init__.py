"""Stage 00 (notebooks/00_draft.ipynb): a team's first suite: `lobeval init` from an OpenAPI description, an MCP server or a benchmark's tools, drafted scenarios (with or without a model), their lint, the review widget, and regression cases from failed conversations.

May import: every package but imports.
"""
