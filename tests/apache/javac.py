"""Small Java programs of the tests, compiled at test time against one Kafka version's jars and run
on them: MM2's own classes (RemoteClusterUtils, OffsetSyncStore, ...) answering the same questions
mirrorlag answers. Sources live in tests/apache/java/; each compiles once per version and run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mirrorlag.apache_kafka.jars import KafkaJars
from mirrorlag.apache_kafka.processes import JVM_OPTIONS

SOURCES = Path(__file__).with_name("java")


def compile_java(jars: KafkaJars, out: Path, *sources: str) -> Path:
    """Compile `sources` (file names under tests/apache/java/) into `out`; return `out`."""
    javac = shutil.which("javac")
    assert javac, "javac is not on PATH (a JDK 17+ is needed, not only a JRE)"
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([javac, "-nowarn", "-cp", jars.classpath, "-d", str(out),
                             *(str(SOURCES / s) for s in sources)],
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return out


def run_java(jars: KafkaJars, classes: Path, main_class: str, *args: str, stdin: str = "",
             timeout: float = 120) -> str:
    """Run a compiled class on the version's jars; its standard output (a failure shows stderr)."""
    java = shutil.which("java")
    assert java, "java is not on PATH"
    result = subprocess.run([java, "-cp", f"{classes}:{jars.classpath}", *JVM_OPTIONS,
                             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", main_class, *args],
                            input=stdin, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{main_class} failed: {result.stderr[-3000:]}"
    return result.stdout
