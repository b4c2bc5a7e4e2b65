"""The pure lag engine (docs/design.md §2–§4): per-partition state, windows, time lag, states."""

from mirrorlag.engine.lag_engine import LagEngine

__all__ = ["LagEngine"]
