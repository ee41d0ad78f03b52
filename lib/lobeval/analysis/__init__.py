"""Stages 04 and 05 (notebooks/04_error_analysis.ipynb, 05_report.ipynb): tables and plots of the results, root causes, agreement with a benchmark's own verdicts, comparison of runs and the gate, the replay of conversations and the HTML report.

May import: lobeval.core, workspace, models, simulation, scoring, judges, evaluation.
"""
