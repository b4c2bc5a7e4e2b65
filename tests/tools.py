"""Real tools from Debian's packages that some tests drive (chromium, promtool, ...).

The README's test command must set up a fresh machine by itself, so a missing tool is installed
with apt-get when the tests run as root (a CI machine, a container); anywhere else the test is
skipped and says which package to install. One apt-get at a time across pytest processes.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

_LOCK = Path(tempfile.gettempdir()) / "mirrorlag-tests-apt.lock"
_UPDATED = Path(tempfile.gettempdir()) / "mirrorlag-tests-apt.updated"


def _can_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None \
        and os.environ.get("MIRRORLAG_TEST_NO_INSTALL") != "1"


def require_tool(binary: str, package: str) -> str:
    """The path of `binary`, installing Debian's `package` (space-separated: several) first if it
    is missing and we may; otherwise the calling test is skipped."""
    found = shutil.which(binary) or (f"/usr/bin/{binary}" if Path(f"/usr/bin/{binary}").exists() else None)
    if found:
        return found
    if not _can_install():
        pytest.skip(f"{binary} is not installed (apt-get install -y {package})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shutil.which(binary):
            if not _UPDATED.exists():
                subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=600)
                _UPDATED.touch()
            proc = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *package.split()],
                                  env=env, capture_output=True, text=True, timeout=1200)
            if proc.returncode != 0:
                # The machine could not get the tool (no mirror, no network): say so in the
                # summary (-ra) rather than fail the suite on the machine's account.
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"apt-get install {package} failed here: {last}")
    found = shutil.which(binary) or (f"/usr/bin/{binary}" if Path(f"/usr/bin/{binary}").exists() else None)
    if not found:
        pytest.fail(f"apt-get installed {package} but {binary} is not on PATH")
    return found
