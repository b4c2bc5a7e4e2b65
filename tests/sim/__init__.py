"""Reference simulation of a source log, a MirrorMaker-like mirror and the poller, driving the
real LagEngine (and LroCache) and checking it against ground truth (docs/design.md §3)."""
