"""Stage 02 (notebooks/02_simulate.ipynb): the simulated users (scripted and model-played), the loop that lets one talk to the bot, and the checks of the simulated user's own mistakes.

May import: lobeval.core, lobeval.workspace, lobeval.models, lobeval.targets.targets.
"""
