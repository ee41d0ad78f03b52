"""The bot under test behind one small protocol (docs/targets.md): HTTP and Python targets, the model-and-prompt target and its MCP tools, the chat widget, and the end state read back after a conversation.

May import: lobeval.core, lobeval.workspace, lobeval.models.
"""
