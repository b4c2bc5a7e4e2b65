"""The pure lag engine (DESIGN §2–§4): per-partition state, windows, time lag, states."""

from mirrorlag.engine.columnar import ColumnarLagEngine
from mirrorlag.engine.lag_engine import LagEngine
from mirrorlag.engine.sampled_stat import WindowedLagStat

__all__ = ["ColumnarLagEngine", "LagEngine", "WindowedLagStat"]
