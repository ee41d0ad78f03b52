"""The records every stage hands the next (docs/formats.md), their errors, and the words, operators and statistics all stages share.

May import: nothing of lobeval's (it is the bottom layer).
"""
