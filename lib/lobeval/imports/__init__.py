"""Conversations no lobeval run had: public benchmark runs (τ-bench, τ²-bench) and production traces, imported into run folders.

May import: every other package.
"""
