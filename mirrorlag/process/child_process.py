"""A server process this process started (a broker, MirrorMaker 2): stopped, paused, resumed and
killed by PID, as the demo and the tests need to do to the real thing."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field


@dataclass
class ChildProcess:
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL past `timeout_s`."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGCONT)  # a paused process cannot shut down
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL, as a crash: no clean shutdown, nothing flushed."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.kill()  # a paused process dies as well
            proc.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and connections and answers nothing."""
        if self.process:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process:
            self.process.send_signal(signal.SIGCONT)
