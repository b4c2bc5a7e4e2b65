"""The SparkSession the rollup runs in: our defaults, the user's --conf on top, Spark kept quiet."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Mapping

from mirrorlag.rollup.errors import RollupError
from mirrorlag.rollup.remote import is_connect

# Set unless the user (or spark-submit) already did.
DEFAULTS: dict[str, str] = {
    "spark.app.name": "mirrorlag-rollup",
    # Day boundaries are UTC; so is every timestamp Spark prints or partitions on.
    "spark.sql.session.timeZone": "UTC",
    # The job prints its own progress; Spark's stage bar would tear through it.
    "spark.ui.showConsoleProgress": "false",
    # The pass's Python workers (samples.partition_days) build a few GB of numpy temporaries per
    # day, task after task. glibc hands arrays over 32 MB back to the kernel at each free (mmap),
    # and every new task's arrays are then fresh pages again: on a VM that reports free pages to
    # its host (virtio-balloon), a storm of page faults. Kept in the worker's heap, a task reuses
    # the pages the previous one touched. The worker's peak is unchanged; it is kept until the
    # worker exits.
    "spark.executorEnv.MALLOC_MMAP_MAX_": "0",
    "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(1 << 40),
}

# When Python drives Spark, Spark filters its console at the level of the class that started it
# (WARN unless that logger is configured) and says so on stderr: configure it, and it does neither.
_LOG4J2 = """\
rootLogger.level = {level}
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def _log4j2_file(level: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"mirrorlag-rollup-log4j2-v3-{level.lower()}.properties"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(_LOG4J2.format(level=level.lower()))
        os.replace(tmp, path)
    return path


INSTALL_JAVA = "install it, e.g. apt-get install openjdk-17-jre-headless"
# Spark 4's launcher resolves jdk.incubator.vector, and every JVM that does says so on stderr at
# start: a notice for Spark's developers, not for the rollup's user. Only this exact line is dropped.
INCUBATOR_WARNING = b"WARNING: Using incubator modules: jdk.incubator.vector"
JVM_WORDS_S = 5.0  # how long a JVM that failed to start may take to be read to its end


def missing_java() -> str | None:
    """Why Spark's launcher would find no java (None: it would), in the user's words. Like
    bin/spark-class: $JAVA_HOME/bin/java where JAVA_HOME is set, else `java` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        if os.access(Path(home) / "bin" / "java", os.X_OK):
            return None
        on_path = shutil.which("java")
        return (f"the rollup needs Java 17 (a JRE): none at JAVA_HOME={home} (no bin/java there)"
                + (f"; Spark uses it before the PATH's {on_path}: unset JAVA_HOME or point it at a Java 17"
                   if on_path else f" or on PATH; {INSTALL_JAVA}"))
    if shutil.which("java"):
        return None
    return f"the rollup needs Java 17 (a JRE): none found on PATH or JAVA_HOME (unset); {INSTALL_JAVA}"


def _forward_stderr(stream: IO[bytes]) -> None:
    """The JVM's stderr to ours, line by line, less the incubator notice."""
    out = sys.__stderr__
    for line in iter(stream.readline, b""):
        if line.rstrip(b"\r\n") != INCUBATOR_WARNING and out is not None:
            out.buffer.write(line)
            out.buffer.flush()


def _launch_jvm(conf) -> None:
    """Starts Spark's JVM (PySpark's own launch_gateway, as getOrCreate would) with its stderr
    piped through _forward_stderr; the session built next uses it. Already started (a session in
    this process): nothing to do."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    read_fd, write_fd = os.pipe()
    forward = threading.Thread(target=_forward_stderr, args=(os.fdopen(read_fd, "rb"),), name="jvm-stderr", daemon=True)
    forward.start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_fd})
    except BaseException:
        os.close(write_fd)
        forward.join(JVM_WORDS_S)  # a JVM that exited at once: its last words before ours
        raise
    os.close(write_fd)  # the JVM holds its own copy
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def build_session(master: str | None, confs: Mapping[str, str], log_level: str = "ERROR",
                  remote: str | None = None):
    """Start (or join) the SparkSession. `master` None leaves it to spark-submit (default local[*]);
    `remote`, a Spark Connect URL, opens a session on that server instead (remote.connect)."""
    if remote:
        from mirrorlag.rollup.remote import connect

        return connect(remote, confs)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf()  # under spark-submit this already holds spark-submit's own settings
    for key, value in DEFAULTS.items():
        if not conf.contains(key):
            conf.set(key, value)
    for key, value in confs.items():
        conf.set(key, value)
    if master:
        conf.setMaster(master)
    if (conf.get("spark.master", "") or "").startswith("spark://"):
        from mirrorlag.rollup.remote import check_standalone_master

        check_standalone_master(conf.get("spark.master"))
    launched_by_us = "PYSPARK_GATEWAY_PORT" not in os.environ  # else spark-submit started the JVM
    if launched_by_us and (why := missing_java()):
        raise RollupError(why)  # before Spark's launcher says only JAVA_GATEWAY_EXITED
    if launched_by_us:
        # Quiet from the first line: setLogLevel only takes effect after Spark's startup chatter.
        opts = conf.get("spark.driver.extraJavaOptions", "") or ""
        if "log4j2.configurationFile" not in opts:
            conf.set("spark.driver.extraJavaOptions",
                     f"{opts} -Dlog4j2.configurationFile=file:{_log4j2_file(log_level)}".strip())
    try:
        if launched_by_us:
            _launch_jvm(conf)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
    except Exception as exc:  # Py4JJavaError, PySparkException: one line, not the JVM's stack
        if "JAVA_GATEWAY_EXITED" in str(exc):  # the JVM did not start: its own words, if any, are above
            raise RollupError("cannot start Spark's JVM: the rollup needs Java 17 (a JRE) at JAVA_HOME or on "
                              f"PATH (java -version says which); {INSTALL_JAVA}") from None
        why = str(getattr(exc, "java_exception", None) or exc).strip().splitlines() or [type(exc).__name__]
        raise RollupError(f"cannot start Spark (master {conf.get('spark.master', 'local[*]')}): {why[0][:300]}") from None
    spark.sparkContext.setLogLevel(log_level)
    return spark


def parallelism(spark) -> int:
    """The session's default parallelism (its executors' cores). A Connect client has no
    sparkContext to ask: a range without a partition count is split that many ways."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    from pyspark.sql import functions as F

    return int(spark.range(1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]) + 1


def local_workers_use_this_python(spark) -> None:
    """The day's pass runs numpy in Python workers (samples.partition_days). On a local master
    they are processes of this machine: unless PYSPARK_PYTHON names one, start them with this
    interpreter, which has the rollup's dependencies, not whatever `python3` is first on the
    PATH (PySpark's default). On a cluster the deployment sets PYSPARK_PYTHON (the image does);
    a Spark Connect server starts its workers with its own."""
    if is_connect(spark):
        return
    sc = spark.sparkContext
    if sc.master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        sc.pythonExec = sys.executable
