"""Lag distributions as mergeable histograms, and their percentiles.

A partition's samples are counted into buckets: exact below 100, above that log-spaced 1 % wide
(the largest and smallest value of a bucket differ by less than 1 %). A partition's histogram is
counted in the day's one pass (partials.py, which also derives the partition's own figures from
it), and topic and flow histograms are sums of their partitions' ones (samples.level_figures):
every level's percentiles come from that one pass over the day. `bucket` is the definition
(Spark's log); the pass buckets in numpy exactly as it would (buckets.py).

Percentile q is the nearest-rank one (the ceil(q * n)-th smallest sample, numpy's
method="inverted_cdf"), reported as the largest sample of the bucket that holds it: a real
sample, never below the exact percentile, at most 1 % above it, exact when it is below 100.
Each bucket also keeps its count, min, max and sum, so min, max and mean are exact.
"""

from __future__ import annotations

import math

from pyspark.sql import Column
from pyspark.sql import functions as F

from mirrorlag.rollup.buckets import EXACT_BELOW, GAMMA

PERCENTILES = {"p50": 500, "p95": 950, "p99": 990}  # per mille: ranks in integer arithmetic


def bucket(v: Column) -> Column:
    """null stays null (counted apart); negative values (never written) stay exact."""
    log_bucket = EXACT_BELOW + F.floor(F.log(v.cast("double") / EXACT_BELOW) / math.log(GAMMA))
    return F.when(v < EXACT_BELOW, v).otherwise(log_bucket).cast("long")
