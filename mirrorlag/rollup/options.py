"""What one run of the rollup is asked to do: the command line's choices, free of Spark.

Its own module so that everything that reads the options (the job, the report's model, the
command line) can import them without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Sequence


@dataclass(frozen=True)
class RollupOptions:
    history: str  # directory or URL holding date=YYYY-MM-DD/*.parquet
    out: str  # directory or URL for the tables and reports
    days: Sequence[date]
    max_gap_seconds: float = 60.0  # longest interval one sample may account for
    worst: int = 10  # rows per measure in the report's tables
    report: bool = True
    # Size the shuffles to each day's input and switch adaptive execution off for the job
    # (off when the user set either): see job.tuned.
    tune_spark: bool = True
    # Late data and finality (docs/design.md §7, manifest.py). lookback: `days` is the lookback window, and
    # a day is rolled up only when new or changed; otherwise the days were asked for by name and
    # are rolled up again whatever their manifests say.
    lookback: bool = False
    # With lookback: older days of the history with segments and no receipt, back this many days
    # from yesterday, are rolled up too (0: none).
    catch_up_days: int = 0
    # A day is final once over and its newest input is this old (the upload lag); provisional before.
    settle_seconds: float = 0.0
    force: bool = False  # replace a day even with fewer inputs than it was rolled up from
    now_ms: int | None = None  # the run's clock (None: read once when the run starts)
