"""What lobeval reads and keeps on disk: a suite (its files, tools, business data and security policy), the tool schemas of an OpenAPI description or a public benchmark, and the run folders under runs/.

May import: lobeval.core.
"""
