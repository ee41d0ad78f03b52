"""A target module written as a script: it exits when imported (tests/test_bad_inputs.py)."""
import sys

sys.exit(0)
