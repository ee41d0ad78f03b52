"""The stages put together: `lobeval run` (the five notebooks executed with papermill into a run folder), the roles a run plays (target, simulated user, judges), the cost estimate, the benchmarks of lobeval itself, and the notebooks' kernel.

May import: every package above it except drafting and imports.
"""
