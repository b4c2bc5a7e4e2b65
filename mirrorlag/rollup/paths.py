"""Where things are: history day directories, output tables and reports, local or remote.

Local paths are checked with the os module (fast, before Spark starts); any other URL
(hdfs://, s3a://, gs://, ...) through the Hadoop FileSystem of the running SparkSession, which
is what will read and write it anyway.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLES = {"partition": "partition_daily", "topic": "topic_daily", "flow": "flow_daily"}


class DayStatus(Enum):
    PRESENT = "present"
    MISSING = "missing"  # no date=... directory
    EMPTY = "empty"  # the directory holds no segment with a row


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def day_dir(history: str, day: date) -> str:
    return join(history, f"date={day.isoformat()}")


def table_path(out: str, level: str) -> str:
    return join(out, TABLES[level])


def trends_path(out: str) -> str:
    return join(out, "trends")


def report_path(out: str, day: date) -> str:
    return join(out, "reports", f"mirrorlag-{day.isoformat()}.html")


def local_path(url: str) -> Path | None:
    """The local path of a plain path or file: URL; None for any other scheme."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme == "":
        return Path(url)
    return None


def _visible(name: str) -> bool:
    # The history writer's temporary and marker files start with '.', Hadoop's with '_'.
    return not name.startswith((".", "_"))


@dataclass(frozen=True)
class DayInput:
    status: DayStatus
    bytes: int = 0  # size of the day's segments: sizes the job's shuffles


def local_segments(directory: Path) -> list[tuple[str, int]]:
    """The day's segments as Spark would read them (visible, not empty), with their sizes."""
    return [(entry.path, entry.stat().st_size) for entry in os.scandir(directory)
            if entry.is_file() and _visible(entry.name) and entry.stat().st_size > 0]


def local_day_input(directory: Path) -> DayInput:
    if not directory.is_dir():
        return DayInput(DayStatus.MISSING)
    import pyarrow.parquet as pq

    size, rows = 0, 0
    for entry in os.scandir(directory):
        if entry.is_file() and _visible(entry.name) and entry.stat().st_size > 0:
            size += entry.stat().st_size
            if rows == 0:
                try:
                    rows = pq.read_metadata(entry.path).num_rows
                except Exception:  # not Parquet, or damaged: let Spark say what is wrong with it
                    rows = 1
    return DayInput(DayStatus.PRESENT if rows else DayStatus.EMPTY, size)


def _hadoop(spark: "SparkSession", url: str) -> tuple[Any, Any]:
    """Hadoop's FileSystem for a URL (with the session's configuration), and the URL as its Path."""
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(url)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def day_input(history: str, day: date, spark: "SparkSession | None" = None) -> DayInput | None:
    """The day's status and size; None when it cannot be told without Spark (a remote URL and no
    session yet). For a remote URL only the listing is checked; a day whose segments hold no row
    is caught after the read (job.rollup_day)."""
    local = local_path(history)
    if local is not None:
        return local_day_input(local / f"date={day.isoformat()}")
    if spark is None:
        return None
    fs, path = _hadoop(spark, day_dir(history, day))
    if not fs.exists(path):
        return DayInput(DayStatus.MISSING)
    size = sum(st.getLen() for st in fs.listStatus(path) if st.isFile() and _visible(st.getPath().getName()))
    return DayInput(DayStatus.PRESENT if size else DayStatus.EMPTY, size)


def exists(url: str, spark: "SparkSession") -> bool:
    """Whether a file or directory is there, locally or through Hadoop's FileSystem."""
    local = local_path(url)
    if local is not None:
        return local.exists()
    fs, path = _hadoop(spark, url)
    return bool(fs.exists(path))


def write_text(url: str, text: str, spark: "SparkSession | None" = None) -> None:
    """Write a small file (the report) locally, or through Hadoop's FileSystem for a remote URL."""
    local = local_path(url)
    data = text.encode("utf-8")
    if local is not None:
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, local)  # a reader never sees half a report
        return
    assert spark is not None, "a remote report needs the SparkSession's FileSystem"
    fs, path = _hadoop(spark, url)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()
