"""Lag distributions as mergeable histograms, and their percentiles.

A partition's samples are counted into buckets: exact below 100, above that log-spaced 1 % wide
(the largest and smallest value of a bucket differ by less than 1 %). A partition's histogram is
counted in the day's one pass (partials.py, which also derives the partition's own figures from
it), and topic and flow histograms are sums of their partitions' ones (samples.level_figures):
every level's percentiles come from that one pass over the day. `bucket` is the definition
(Spark's log); the pass buckets in numpy with edges Spark confirms (`exact_edges`).

Percentile q is the nearest-rank one (the ceil(q * n)-th smallest sample, numpy's
method="inverted_cdf"), reported as the largest sample of the bucket that holds it: a real
sample, never below the exact percentile, at most 1 % above it, exact when it is below 100.
Each bucket also keeps its count, min, max and sum, so min, max and mean are exact.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from mirrorlag.rollup import buckets
from mirrorlag.rollup.buckets import EXACT_BELOW, GAMMA

PERCENTILES = {"p50": 500, "p95": 950, "p99": 990}  # per mille: ranks in integer arithmetic


def bucket(v: Column) -> Column:
    """null stays null (counted apart); negative values (never written) stay exact."""
    log_bucket = EXACT_BELOW + F.floor(F.log(v.cast("double") / EXACT_BELOW) / math.log(GAMMA))
    return F.when(v < EXACT_BELOW, v).otherwise(log_bucket).cast("long")


def _spark_buckets(spark: SparkSession, values: np.ndarray) -> np.ndarray:
    df = spark.createDataFrame(pa.table({"i": np.arange(values.size), "v": values.astype(np.int64)}))
    got = df.select("i", bucket(F.col("v")).alias("b")).toArrow().sort_by("i")
    return got.column("b").to_numpy()


def exact_edges(spark: SparkSession) -> np.ndarray:
    """The smallest value of each bucket above 100 as `bucket` (Spark's log) places it, for
    buckets.bucket to bucket values in numpy exactly as Spark would. numpy's steps are kept
    where Spark confirms them on both sides (one small query); the others are searched again
    with Spark around numpy's (a second query). Measured: 78 of the 3,925 steps differ, all
    above 10**14, where the JVM's log and numpy's differ in the last bit; Spark's steps were
    within 2 ulps of numpy's, so the search looks 16 ulps either side first (0.45 -> 0.2 s)."""
    crossing = buckets.crossings()
    table = buckets.edges(crossing)
    want = np.arange(EXACT_BELOW + 1, EXACT_BELOW + 1 + table.size)
    got = _spark_buckets(spark, np.r_[table, table - 1])
    bad = np.flatnonzero((got[: table.size] != want) | (got[table.size:] != want - 1))
    for width in (16, buckets.WINDOW):
        if not bad.size:
            break
        bad = _search(spark, table, crossing, want, bad, width)
    if bad.size:
        raise ArithmeticError(f"Spark's steps to buckets {want[bad].tolist()} are not near numpy's")
    return table


def _search(spark: SparkSession, table: np.ndarray, crossing: np.ndarray, want: np.ndarray,
            bad: np.ndarray, width: int) -> np.ndarray:
    """Set table[i] for each i in `bad` to Spark's step within `width` ulps of numpy's crossing;
    returns those not found there."""
    around = [np.unique(buckets.edges(buckets.window(crossing[i], width))) for i in bad]
    placed = np.split(_spark_buckets(spark, np.concatenate(around)), np.cumsum([a.size for a in around])[:-1])
    missed = []
    for i, values, got_i in zip(bad, around, placed):
        reached = got_i >= want[i]
        if not reached.any() or reached[0]:
            missed.append(i)
        else:
            table[i] = values[np.argmax(reached)]
    return np.array(missed, np.int64)
