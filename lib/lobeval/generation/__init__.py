"""Stage 01 (notebooks/01_generate.ipynb): test cases from a suite's scenario templates and business data, and the attack cases of its security policy.

May import: lobeval.core, lobeval.workspace, lobeval.simulation (the user's way of saying things).
"""
