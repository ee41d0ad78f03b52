"""Stage 03 (notebooks/03_evaluate.ipynb): every conversation scored and judged into evaluation results.

May import: every package above it: core, workspace, models, targets, simulation, scoring, judges.
"""
