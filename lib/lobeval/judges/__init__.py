"""The language-model judges of how the bot talked (lobeval's and azure-ai-evaluation's), analysts' labels, and the calibration of judges against them.

May import: lobeval.core, lobeval.workspace, lobeval.models, lobeval.scoring.scoring.
"""
