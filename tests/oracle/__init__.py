"""The lag engine's oracle: docs/design.md §3 as a plain per-partition loop, written for clarity, not speed.

mirrorlag.engine computes the same rules over columns; tests/unit/test_engine_vs_oracle.py holds it
to this model poll after poll, on random estates and config changes.
"""
