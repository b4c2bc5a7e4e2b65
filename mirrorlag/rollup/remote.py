"""Spark Connect (`--remote sc://HOST:PORT`, or SPARK_REMOTE): the URL checked, the server reached,
a session opened, mirrorlag shipped to it; every failure one line (RollupError), never a gRPC
traceback.

The job runs unchanged against a Connect session: it uses only the DataFrame API (no
sparkContext, RDD or driver JVM there: session.parallelism and paths.py say how they do without).
Connect's server runs the Python workers, so the client sends the mirrorlag it runs as a zip
artifact (ship.py): the server needs only the rollup's dependencies, never a matching install.
"""

from __future__ import annotations

import re
import socket
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from mirrorlag.rollup.errors import RollupError, grpc_status

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_PORT = 15002  # Spark Connect's own default (spark.connect.grpc.binding.port)
CONNECT_TIMEOUT_S = 10.0
# Settings a Connect session can take from the client: runtime SQL settings. Everything else
# (memory, executors, executorEnv) belongs to the server's own configuration.
SESSION_DEFAULTS = {"spark.sql.session.timeZone": "UTC"}
_URL = re.compile(r"sc://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/;\[\]]+)(?::(?P<port>\d+))?/?(?P<params>;.*)?")
_SECRET = re.compile(r"(token=)[^;]*", re.IGNORECASE)


def masked(url: str) -> str:
    """The URL as it may be printed: a `token=` parameter's value never is."""
    return _SECRET.sub(r"\1****", url)


@dataclass(frozen=True)
class RemoteUrl:
    url: str = field(repr=False)  # may hold a token
    host: str
    port: int

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def parse(url: str) -> RemoteUrl:
    """A Spark Connect URL, `sc://HOST[:PORT][/;key=value...]` (Spark's own form)."""
    m = _URL.fullmatch(url.strip())
    if m is None:
        raise RollupError(f"--remote: not a Spark Connect URL (sc://HOST[:PORT][/;key=value...]): {masked(url)!r}")
    port = int(m["port"]) if m["port"] else DEFAULT_PORT
    if not 0 < port < 65536:
        raise RollupError(f"--remote: port out of range in {masked(url)!r}")
    return RemoteUrl(url.strip(), m["host"].strip("[]"), port)


def check_reachable(host: str, port: int, what: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail at once when nothing listens there: Connect's client would retry for about ten
    minutes before it says so, a standalone driver for a minute (and then only in its log)."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise RollupError(f"cannot reach the {what} at {host}:{port}: {why}") from None


def check_standalone_master(master: str) -> None:
    """`spark://HOST:PORT[,HOST:PORT...]` (standby masters too): one of them must listen."""
    failures = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            host, port = address, "7077"  # Spark's default port
        try:
            check_reachable(host.strip("[]"), int(port), "Spark master")
            return
        except RollupError as exc:
            failures.append(str(exc))
    raise RollupError(failures[0] if len(failures) == 1 else f"cannot reach any Spark master of {master}")


def connect(url: str, confs: Mapping[str, str]) -> "SparkSession":
    """A Connect session with the job's settings, mirrorlag shipped to its Python workers."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    remote = parse(url)
    check_reachable(remote.host, remote.port, "Spark Connect server")
    # The client warns before it raises after its last retry; the error becomes our one line.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    try:
        spark = SparkSession.builder.remote(remote.url).create()
    except (PySparkException, ValueError) as exc:
        raise RollupError(f"--remote {masked(url)}: {_first_line(exc)}") from None
    try:
        _handshake(spark, remote)
        _configure(spark, {**SESSION_DEFAULTS, **confs})
        ship_to(spark)
    except BaseException:
        stop(spark)
        raise
    return spark


def stop(spark: "SparkSession") -> None:
    """End the session on the server, if it is still there. Stopping releases the session, a
    call the client would retry for about ten minutes against a server that is gone."""
    _few_retries(spark)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            spark.stop()
        except Exception:  # noqa: BLE001 - a server gone: nothing left to release
            pass


def _few_retries(spark: "SparkSession", retries: int = 3, max_backoff_ms: int = 2000) -> None:
    """Quick retries for the session's calls. The client's default retries an unavailable server
    for about ten minutes; a Connect server keeps its sessions in memory, so one that restarts
    has lost the job's anyway: better to say so within seconds."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies([DefaultPolicy(max_retries=retries, max_backoff=max_backoff_ms)])


def _handshake(spark: "SparkSession", remote: RemoteUrl) -> None:
    """Something listens, but it may not be Connect: ask once, with few retries."""
    from pyspark.errors import PySparkException

    _few_retries(spark)
    try:
        with warnings.catch_warnings():  # the client warns of its retries before it raises
            warnings.simplefilter("ignore")
            spark.version
    except PySparkException as exc:
        raise RollupError(f"no Spark Connect server answers at {remote.where}: {_first_line(exc)}") from None
    _few_retries(spark, retries=6, max_backoff_ms=8000)  # the job's calls: ~20 s for a blip


def _configure(spark: "SparkSession", confs: Mapping[str, str]) -> None:
    from pyspark.errors import PySparkException

    for key, value in confs.items():
        try:
            spark.conf.set(key, value)
        except PySparkException as exc:
            if "CANNOT_MODIFY_CONFIG" in str(exc):
                raise RollupError(f"--conf {key}: the Spark Connect server does not take it from a client "
                                  "(set it in the server's configuration)") from None
            raise RollupError(f"--conf {key}: {_first_line(exc)}") from None


def ship_to(spark: "SparkSession") -> None:
    """Add the running mirrorlag as a Python artifact of the session (on its workers' sys.path)."""
    from pyspark.errors import PySparkException

    from mirrorlag.rollup.ship import package_zip

    with tempfile.TemporaryDirectory(prefix="mirrorlag-ship-") as tmp:
        path = package_zip(Path(tmp) / "mirrorlag.zip")
        try:
            spark.addArtifacts(str(path), pyfile=True)
        except PySparkException as exc:
            raise RollupError(f"cannot send mirrorlag to the Spark Connect server: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = grpc_status(exc) or str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return masked(first[:300])


def is_connect(spark: object) -> bool:
    """Whether a session is a Spark Connect client (no sparkContext, no driver JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
