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
