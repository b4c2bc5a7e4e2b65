"""Where things are: history day directories, output tables and reports, local or remote.

Local paths are checked with the os module (fast, before Spark starts); any other URL
(hdfs://, s3a://, gs://, ...) is listed by Spark itself (its binaryFile source, which reads no
content), which is what will read and write it anyway, the same way on a classic session and a
Spark Connect one. With Spark Connect, local paths are this machine's and the server's alike: the
client checks them and writes the report, the server's workers read and write the rest.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from mirrorlag.history.group_schema import GROUPS_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mirrorlag.rollup.manifest import Manifest, Segment

TABLES = {"partition": "partition_daily", "topic": "topic_daily", "flow": "flow_daily"}
TRENDS = "trends"


class DayStatus(Enum):
    PRESENT = "present"
    MISSING = "missing"  # no date=... directory
    EMPTY = "empty"  # the directory holds no segment with a row


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def day_dir(history: str, day: date) -> str:
    return join(history, f"date={day.isoformat()}")


def group_day_dir(history: str, day: date) -> str:
    """The consumer groups' history of a day (history.group_schema, written beside the partitions')."""
    return join(history, GROUPS_DIR, f"date={day.isoformat()}")


def table_path(out: str, level: str) -> str:
    return join(out, TABLES[level])


def trends_path(out: str) -> str:
    return join(out, TRENDS)


# The day's committed report, a file of the commit like the tables' (manifest.py):
# <out>/_reports/date=YYYY-MM-DD/mirrorlag-YYYY-MM-DD-<run>.html, named by the day's manifest.
REPORTS = "_reports"


def report_path(out: str, day: date) -> str:
    """Where people find the day's report: a copy of the committed one (published_report)."""
    return join(out, "reports", f"mirrorlag-{day.isoformat()}.html")


def report_version(day: date, run: str) -> str:
    """The name of the day's report as a run writes it, in <out>/_reports/date=DAY/."""
    return f"mirrorlag-{day.isoformat()}-{run}.html"


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


def _path_not_found(exc: Exception) -> bool:
    condition = getattr(exc, "getCondition", lambda: None)()
    return condition == "PATH_NOT_FOUND" or "PATH_NOT_FOUND" in str(exc).split("\n", 1)[0]


def remote_day_input(spark: "SparkSession", directory: str) -> DayInput:
    """A remote day's status and size, listed by Spark itself (binaryFile reads no file's
    content when asked only its length): the same connectors and credentials as the read, and
    the same on a classic session and a Spark Connect one (which has no driver JVM to ask)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        (size,) = spark.read.format("binaryFile").load(directory).agg(F.coalesce(F.sum("length"), F.lit(0))).first()
    except AnalysisException as exc:
        if _path_not_found(exc):
            return DayInput(DayStatus.MISSING)
        raise
    return DayInput(DayStatus.PRESENT if size else DayStatus.EMPTY, int(size))


def day_input(history: str, day: date, spark: "SparkSession | None" = None) -> DayInput | None:
    """The day's status and size; None when it cannot be told without Spark (a remote URL and no
    session yet). For a remote URL only the listing is checked; a day whose segments hold no row
    is caught after the read (job.rollup_day)."""
    local = local_path(history)
    if local is not None:
        return local_day_input(local / f"date={day.isoformat()}")
    if spark is None:
        return None
    return remote_day_input(spark, day_dir(history, day))


_DAY_DIR = re.compile(r"date=(\d{4}-\d{2}-\d{2})")


def table_days(url: str, spark: "SparkSession") -> list[date]:
    """The days of a table written by the job that other days' trends may read: committed (a
    manifest names their files) and final. Tables from before manifests (no `_manifests` beside
    them): every `date=YYYY-MM-DD` partition holding a file."""
    from mirrorlag.rollup.manifest import DIR

    out = url.rstrip("/").rsplit("/", 1)[0]
    if exists(join(out, DIR), spark):
        return sorted(d for d, m in manifests(out, spark).items() if m.final)
    return partition_days(url, spark)


def partition_days(url: str, spark: "SparkSession | None") -> list[date]:
    """The `date=YYYY-MM-DD` partitions of a table holding a file."""
    local = local_path(url)
    if local is not None:
        if not local.is_dir():
            return []
        found = []
        for entry in os.scandir(local):
            m = _DAY_DIR.fullmatch(entry.name)
            if m and entry.is_dir() and any(e.is_file() and _visible(e.name) for e in os.scandir(entry.path)):
                found.append(date.fromisoformat(m[1]))
        return sorted(found)
    assert spark is not None, "a remote table is listed by Spark"
    return remote_table_days(spark, url)


def remote_table_days(spark: "SparkSession", url: str) -> list[date]:
    """table_days through Spark's listing (the partition column of binaryFile: no file is read)."""
    from pyspark.errors import AnalysisException

    try:
        listed = spark.read.format("binaryFile").load(url)
        if "date" not in listed.columns:  # no date=... directory under it
            return []
        rows = listed.select("date").distinct().collect()
    except AnalysisException as exc:
        if _path_not_found(exc):
            return []
        raise
    return sorted(r["date"] if isinstance(r["date"], date) else date.fromisoformat(str(r["date"])) for r in rows)


def write_text(url: str, text: str, spark: "SparkSession | None" = None) -> None:
    """Write a small file (the report): locally, through Hadoop's FileSystem for a remote URL on
    a classic session (the tables' own connectors), through fsspec on this machine on a Spark
    Connect session (no driver JVM here to write with)."""
    local = local_path(url)
    data = text.encode("utf-8")
    if local is not None:
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, local)  # a reader never sees half a report
        return
    assert spark is not None, "a remote report needs the SparkSession"
    from mirrorlag.rollup.remote import is_connect

    if is_connect(spark):
        _write_fsspec(url, data)
        return
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(url)
    stream = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).create(path, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()


def _write_fsspec(url: str, data: bytes) -> None:
    from mirrorlag.rollup.errors import RollupError

    scheme = urlparse(url).scheme
    try:
        import fsspec

        with fsspec.open(url, "wb") as f:
            f.write(data)
    except ImportError as exc:
        raise RollupError(f"the report to {url} is written from this machine through Spark Connect, and fsspec "
                          f"cannot write {scheme}:// here ({exc}): install its filesystem (e.g. s3fs for s3a://), "
                          "or pass --no-report") from None
    except (OSError, ValueError) as exc:
        raise RollupError(f"cannot write the report to {url}: {exc}") from None


# --- small files and listings for the manifests (manifest.py): local with os, remote through Spark --


def _not_found(exc: Exception) -> bool:
    from pyspark.errors import AnalysisException

    return isinstance(exc, AnalysisException) and _path_not_found(exc)


def exists(url: str, spark: "SparkSession | None") -> bool:
    local = local_path(url)
    if local is not None:
        return local.exists()
    assert spark is not None, "a remote path is listed by Spark"
    try:
        spark.read.format("binaryFile").load(url).select("path").limit(1).collect()
    except Exception as exc:
        if _not_found(exc):
            return False
        raise
    return True


def list_files(url: str, spark: "SparkSession | None") -> "list[Segment]":
    """The visible, non-empty files directly in a directory (none when it is missing), with their
    sizes and mtimes: a listing, no content read (binaryFile for a remote URL, asked only the
    length and time)."""
    from mirrorlag.rollup.manifest import Segment

    local = local_path(url)
    if local is not None:
        try:
            entries = list(os.scandir(local))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for e in entries:
            if e.is_file() and _visible(e.name):
                st = e.stat()
                if st.st_size > 0:
                    found.append(Segment(e.name, st.st_size, st.st_mtime_ns // 1_000_000))
        return sorted(found)
    assert spark is not None, "a remote directory is listed by Spark"
    try:
        rows = (spark.read.format("binaryFile").option("recursiveFileLookup", "false").load(url)
                .select("path", "length", "modificationTime").collect())
    except Exception as exc:
        if _not_found(exc):
            return []
        raise
    return sorted(Segment(r["path"].rstrip("/").rsplit("/", 1)[-1], int(r["length"]),
                          int(r["modificationTime"].timestamp() * 1000)) for r in rows if r["length"])


def read_text(url: str, spark: "SparkSession | None") -> str | None:
    """A small file's text; None when it does not exist."""
    local = local_path(url)
    if local is not None:
        try:
            return local.read_text("utf-8")
        except FileNotFoundError:
            return None
    assert spark is not None, "a remote file is read by Spark"
    try:
        row = spark.read.format("binaryFile").load(url).select("content").first()
    except Exception as exc:
        if _not_found(exc):
            return None
        raise
    return None if row is None else bytes(row["content"]).decode("utf-8")


def delete_files(urls: "list[str]", spark: "SparkSession | None") -> None:
    """Delete files (missing ones are fine): os locally, Hadoop's FileSystem on a classic session,
    fsspec from this machine on a Spark Connect one."""
    remote = []
    for url in urls:
        local = local_path(url)
        if local is None:
            remote.append(url)
            continue
        for f in (local, local.with_name(f".{local.name}.crc")):  # and the checksum Hadoop's local FS wrote
            try:
                f.unlink()
            except FileNotFoundError:
                pass
    if not remote:
        return
    assert spark is not None
    from mirrorlag.rollup.remote import is_connect

    if is_connect(spark):
        import fsspec

        for url in remote:
            fs, path = fsspec.core.url_to_fs(url)
            if fs.exists(path):
                fs.rm(path)
        return
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for url in remote:
        path = jvm.org.apache.hadoop.fs.Path(url)
        path.getFileSystem(conf).delete(path, False)


def manifests(out: str, spark: "SparkSession | None") -> "dict[date, Manifest]":
    """The committed days under `out` with their manifests (manifest.py): one listing and read
    (one Spark job for a remote URL)."""
    from mirrorlag.rollup.manifest import DIR, Manifest

    directory = join(out, DIR)
    local = local_path(directory)
    texts: dict[str, str] = {}
    if local is not None:
        for f in list_files(directory, None):
            text = read_text(join(directory, f.name), None) if _MANIFEST.fullmatch(f.name) else None
            if text is not None:
                texts[f.name] = text
    else:
        assert spark is not None, "a remote directory is listed by Spark"
        try:
            rows = spark.read.format("binaryFile").load(directory).select("path", "content").collect()
        except Exception as exc:
            if _not_found(exc):
                return {}
            raise
        texts = {r["path"].rstrip("/").rsplit("/", 1)[-1]: bytes(r["content"]).decode("utf-8") for r in rows}
    found = {}
    for name, text in texts.items():
        m = _MANIFEST.fullmatch(name)
        if m:
            found[date.fromisoformat(m[1])] = Manifest.from_json(text, join(directory, name))
    return found


_MANIFEST = re.compile(r"date=(\d{4}-\d{2}-\d{2})\.json")


def committed_files(out: str, table: str, day: date, manifest: "Manifest") -> list[str]:
    """The files of a committed day's table (table: partition_daily, ..., trends)."""
    return [join(out, table, f"date={day.isoformat()}", name) for name in manifest.files.get(table, ())]


def table_files(url: str, spark: "SparkSession | None") -> dict[date, list[str]]:
    """Every visible file of a table by its `date=` partition: one listing (one Spark job for a
    remote URL, reading no content)."""
    local = local_path(url)
    found: dict[date, list[str]] = {}
    if local is not None:
        if not local.is_dir():
            return found
        for entry in os.scandir(local):
            m = _DAY_DIR.fullmatch(entry.name)
            if m and entry.is_dir():
                found[date.fromisoformat(m[1])] = [e.name for e in os.scandir(entry.path)
                                                   if e.is_file() and _visible(e.name)]
        return found
    assert spark is not None, "a remote table is listed by Spark"
    try:
        listed = spark.read.format("binaryFile").load(url)
        if "date" not in listed.columns:
            return found
        rows = listed.select("date", "path").collect()
    except Exception as exc:
        if _not_found(exc):
            return found
        raise
    for r in rows:
        day = r["date"] if isinstance(r["date"], date) else date.fromisoformat(str(r["date"]))
        found.setdefault(day, []).append(r["path"].rstrip("/").rsplit("/", 1)[-1])
    return found
