"""The keys a shipped properties text shows, and which of them are not at the loader's default
without saying why. The defaults are read from the loader's tables (GLOBAL_KEYS, FLOW_KEYS) at each
call, never copied: they are the one source of every default.

A key is shown in two forms: an active `key = value` line, or a commented-out `#key = value` (no
space after the `#`: prose comments are `# ...`), which shows the default. An active line whose
value is not the default must say why in the comment lines directly above it, with a sentence that
starts "differs from the default:"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import javaproperties

from mirrorlag.config.loader import FLOW_KEYS, GLOBAL_KEYS

MARK = "differs from the default:"
_REASON = re.compile(re.escape(MARK) + r"\s*\w+(?:\W+\w+){2}")  # a reason of a few words at least
_COMMENTED_OUT = re.compile(r"#(?=[^\s#!])")


@dataclass(frozen=True)
class Shown:
    key: str
    value: str
    line: int  # 1-based, in the text it was read from
    active: bool  # False: `#key = value`
    comment: str  # the prose comment lines directly above it, joined by spaces


def table() -> dict[str, tuple[Callable[[str], Any], str]]:
    """key -> (parser, default text): the loader's tables as they are now."""
    return {**GLOBAL_KEYS, **FLOW_KEYS}


def shown(text: str) -> list[Shown]:
    out: list[Shown] = []
    comment: list[str] = []
    line = 1
    for element in javaproperties.parse(text):
        source = element.source
        if isinstance(element, javaproperties.KeyValue):
            out.append(Shown(element.key, element.value, line, True, " ".join(comment)))
            comment = []
        elif isinstance(element, javaproperties.Comment) and _COMMENTED_OUT.match(source):
            ((key, value),) = javaproperties.loads(source[1:]).items()
            out.append(Shown(key, value, line, False, " ".join(comment)))
            comment = []
        elif isinstance(element, javaproperties.Comment):
            comment.append(element.value)
        else:  # a blank line ends a comment block
            comment = []
        line += source.count("\n")
    return out


def is_default(key: str, value: str) -> bool:
    """Whether `value` means what the default means (parsed by the key's own parser: `0.0.0.0:9464`
    and ` 0.0.0.0:9464 ` alike)."""
    parser, default = table()[key]
    try:
        return bool(parser(value) == parser(default))
    except Exception:  # the loader's _Bad: a value it would refuse is not the default
        return False


def says_why(comment: str) -> bool:
    return _REASON.search(comment) is not None


def not_default_unexplained(where: str, lines: Iterable[Shown]) -> list[str]:
    """Problems with the keys of the tables shown in one text: a commented-out line that does not
    show the default, or an active line off its default with no reason above it. Other keys (MM2's
    clusters, clients, `A->B.` values of one flow) are the example's own configuration."""
    keys = table()
    problems = []
    for s in lines:
        if s.key not in keys or is_default(s.key, s.value):
            continue
        if not s.active:
            problems.append(f"{where}:{s.line}: #{s.key} = {s.value!r}: a commented-out key shows its default, "
                            f"{keys[s.key][1]!r}")
        elif not says_why(s.comment):
            problems.append(f"{where}:{s.line}: {s.key} = {s.value!r} is not its default {keys[s.key][1]!r}: say why "
                            f"in a comment above it starting {MARK!r}")
    return problems


def listing_problems(where: str, lines: list[Shown]) -> list[str]:
    """What keeps a text from listing every key of the tables exactly once, each with a comment."""
    keys = table()
    problems = [f"{where}: {key} is missing" for key in keys if key not in {s.key for s in lines}]
    seen: dict[str, int] = {}
    for s in lines:
        if s.key not in keys:
            problems.append(f"{where}:{s.line}: {s.key} is not a key mirrorlag reads")
        if s.key in seen:
            problems.append(f"{where}:{s.line}: {s.key} is shown again (first on line {seen[s.key]})")
        seen.setdefault(s.key, s.line)
        if not s.comment.strip():
            problems.append(f"{where}:{s.line}: {s.key} has no comment of its own directly above it")
    return problems
