"""Errors that end a command with one clear line and exit status 2, never a traceback."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


class MirrorlagError(Exception):
    """An error the user can act on; its str() is the whole message."""

    exit_status = 2


@dataclass
class ConfigError(MirrorlagError):
    """A configuration problem, located by file, line and key where they are known."""

    message: str
    file: Path | None = None
    line: int | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = str(self.file) + (f":{self.line}" if self.line else "")
        if self.key:
            where = f"{where}: {self.key}" if where else self.key
        return f"{where}: {self.message}" if where else self.message


def exit_status(command: Callable[[], int]) -> int:
    """Run a command: a MirrorlagError ends it with its one line on stderr and its exit status,
    Ctrl-C with 130."""
    try:
        return command()
    except MirrorlagError as exc:
        print(f"mirrorlag: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
