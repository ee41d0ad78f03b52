"""What the bot did against what it should have done: function-call metrics, checks and claims (what the bot said against what it did), and how far each offline finding may be trusted.

May import: lobeval.core, lobeval.workspace, lobeval.simulation.
"""
