"""Apache Kafka's jars, by pinned version, resolved by Maven from pom.xml beside this file.

The jars land in `$XDG_CACHE_HOME/mirrorlag/apache-kafka/<version>/` (default `~/.cache/...`),
copied there from Maven's own cache (`~/.m2`), so a second resolve costs nothing and a first one
only the download. A directory is complete once its `classpath` marker exists: a killed resolve
leaves no half classpath behind.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mirrorlag.errors import MirrorlagError

# The newest 4.x whose connect-mirror Maven Central serves here (4.4.0's is not), and the last 3.9.x.
KAFKA_4 = "4.3.1"
KAFKA_3 = "3.9.2"
VERSIONS = (KAFKA_4, KAFKA_3)
POM = Path(__file__).with_name("pom.xml")
MARKER = "classpath"
RESOLVE_TIMEOUT_S = 900


@dataclass(frozen=True)
class KafkaJars:
    """One version's resolved jars: the classpath of a broker, MirrorMaker 2 and a javac'd driver."""

    version: str
    directory: Path

    @property
    def classpath(self) -> str:
        return str(self.directory / "*")

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def jar(self, artifact: str) -> Path:
        """The jar of one artifact of this version, e.g. `connect-mirror-client`."""
        path = self.directory / f"{artifact}-{self.version}.jar"
        if not path.is_file():
            raise MirrorlagError(f"{path} is missing: resolve Kafka {self.version} again")
        return path


def missing_tools() -> str | None:
    """What this machine lacks to run Apache Kafka (Java 17+ and Maven), or None."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH (the Apache Kafka tier needs Java 17+ and Maven)"
    return None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mirrorlag" / "apache-kafka"


def resolve(version: str, root: Path | None = None) -> KafkaJars:
    """The jars of `version`, resolved with Maven on first use; a clear error when that fails."""
    if version not in VERSIONS:
        raise MirrorlagError(f"Apache Kafka {version} is not pinned here (pinned: {', '.join(VERSIONS)})")
    directory = (root or cache_root()) / version
    if (directory / MARKER).is_file():
        return KafkaJars(version, directory)
    if reason := missing_tools():
        raise MirrorlagError(reason)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one resolve at a time (test workers, a demo beside them)
        if not (directory / MARKER).is_file():
            _resolve_into(version, directory)
    return KafkaJars(version, directory)


def _resolve_into(version: str, directory: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=directory.parent))
    try:
        result = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(POM), f"-Dkafka.version={version}",
             "dependency:copy-dependencies", f"-DoutputDirectory={staging}"],
            capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            errors = [line for line in (result.stdout + result.stderr).splitlines() if "ERROR" in line]
            raise MirrorlagError(f"Maven could not resolve Apache Kafka {version}: "
                                 + (errors[0] if errors else f"exit {result.returncode}"))
        jars = sorted(p.name for p in staging.glob("*.jar"))
        (staging / MARKER).write_text("\n".join(jars) + "\n")
        shutil.rmtree(directory, ignore_errors=True)
        staging.rename(directory)
    except subprocess.TimeoutExpired as exc:
        raise MirrorlagError(f"Maven took over {RESOLVE_TIMEOUT_S} s to resolve Apache Kafka {version}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
