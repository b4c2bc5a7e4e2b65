"""MM2's DefaultGroupFilter: which consumer groups a flow checkpoints (`groups`, `groups.exclude`,
the legacy `groups.blacklist`), and the LIST-of-regexes syntax it shares with the topic filter."""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUPS_DEFAULT = ".*"
GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"
_NOTHING = re.compile(r"(?!)")  # an empty list selects nothing


def compile_patterns(text: str) -> re.Pattern[str]:
    """ConfigDef's LIST split on commas; MM2 joins the regexes with '|' and matches whole names.
    Raises ValueError naming the regex that does not compile."""
    regexes = [r.strip() for r in text.split(",") if r.strip()]
    for regex in regexes:
        try:
            re.compile(regex)
        except re.error as err:
            raise ValueError(f"invalid regular expression {regex!r}: {err}") from None
    return re.compile("|".join(f"(?:{r})" for r in regexes)) if regexes else _NOTHING


@dataclass(frozen=True)
class GroupFilter:
    include: re.Pattern[str]
    exclude: re.Pattern[str]

    def accepts(self, group: str) -> bool:
        """DefaultGroupFilter.shouldReplicateGroup: included and not excluded (excludes win)."""
        return self.include.fullmatch(group) is not None and self.exclude.fullmatch(group) is None
