"""A plugin's output read as Nagios reads it: the first line's text before `|` is the status, the
rest of it perfdata, each item validated against the Monitoring Plugins grammar
`'label'=value[UOM];[warn];[crit];[min];[max]` (https://www.monitoring-plugins.org/doc/guidelines.html)."""

from __future__ import annotations

import re

_NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_RANGE = rf"@?(?:(?:~|{_NUM}):)?(?:{_NUM})?"
PERF_ITEM = re.compile(rf"^(?P<label>'[^'=]+'|[^'= ]+)=(?P<value>{_NUM}|U)(?P<uom>s|ms|us|%|B|KB|MB|TB|c)?"
                       rf"(?:;(?P<warn>{_RANGE})(?:;(?P<crit>{_RANGE})(?:;(?P<min>{_NUM})?(?:;(?P<max>{_NUM})?)?)?)?)?$")
STATUS = re.compile(r"^MIRRORLAG (OK|WARNING|CRITICAL|UNKNOWN) - (.+)$")


def parse(output: str) -> tuple[str, str, dict[str, tuple[str, str, str, str, str, str]]]:
    """(status word, summary, {label: (value, uom, warn, crit, min, max)}) of a plugin's output;
    asserts the grammar."""
    first = output.splitlines()[0]
    text, _, perf = first.partition("|")
    m = STATUS.match(text.strip())
    assert m, f"not a status line: {first!r}"
    items = {}
    for item in perf.split():
        p = PERF_ITEM.match(item)
        assert p, f"perfdata item outside the plugin grammar: {item!r}"
        items[p["label"].strip("'")] = tuple(p[g] or "" for g in ("value", "uom", "warn", "crit", "min", "max"))
    return m[1], m[2], items
