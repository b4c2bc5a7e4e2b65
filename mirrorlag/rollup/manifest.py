"""A rolled-up day's manifest: what it read, what it wrote, whether it is final (docs/design.md §7,
"Late data and finality"). Pure logic: the comparisons that decide what a run does with a day.

    <out>/_manifests/date=YYYY-MM-DD.json     the day's commit marker, written last

A day's tables are appended to their `date=` directories under new file names, the manifest then
names them (the commit: one small file written whole), and the files of the version it replaced
are deleted after. Readers that respect the manifest (the trends' listing, `committed_files`) see
the previous version until the new manifest is in place, so a job killed between its four table
writes leaves the previous committed state; the files it wrote are removed by the next run before
anything reads the day's directory. Why files named by the manifest rather than directories
switched by it: the tables stay plain Hive-style `date=` partitions that any Spark reads, with no
second layout for readers to learn, and the switch is one write on every store (an object store
has no atomic rename of a directory).

The report is one more file of the commit (`_reports/date=DAY/`, job.rollup_day); the copy people
open (`reports/mirrorlag-DAY.html`) is removed before the manifest is written and written after it.

The same manifest goes into the history's own day directory as the rollup's receipt
(`history.layout.ROLLUP_RECEIPT`), where the sidecar's expiry looks for it: no key naming the
rollup's output, no credentials for its store. The consumer groups' segments of the day
(`<history>/_groups/date=DAY/`, read into `group_daily`) are inputs of the day too: named in the
manifest as `group_segments`, compared like the partitions' segments, and receipted in their own
day directory (`Manifest.groups_receipt`), so they neither expire unread nor change unseen.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from enum import Enum
from typing import Any, Mapping, Sequence

from mirrorlag.rollup.errors import RollupError

FORMAT = 1
DIR = "_manifests"


@dataclass(frozen=True, order=True)
class Segment:
    """One input file as listed: its name in the day's directory, its size and mtime."""
    name: str
    size: int
    mtime_ms: int


@dataclass(frozen=True)
class Manifest:
    day: date
    run: str  # the run that wrote it (its files carry no other mark)
    final: bool
    segments: tuple[Segment, ...]  # what the day's tables were made of
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # table dir -> its file names in date=DAY/
    max_gap_seconds: float = 60.0  # a setting that changes every figure: a day made with another is stale
    written_ms: int = 0
    group_segments: tuple[Segment, ...] = ()  # the consumer groups' segments of the day (_groups/date=DAY/)

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def newest_ms(self) -> int:
        return max((s.mtime_ms for s in (*self.segments, *self.group_segments)), default=0)

    def groups_receipt(self) -> "Manifest":
        """The receipt for the groups' day directory: this manifest with the group segments as
        its `segments`, the names the sidecar's expiry of `_groups/` looks for."""
        return replace(self, segments=self.group_segments, group_segments=())

    def to_json(self) -> str:
        body: dict[str, Any] = asdict(self)
        body["day"] = self.day.isoformat()
        body["segments"] = [[s.name, s.size, s.mtime_ms] for s in self.segments]
        body["group_segments"] = [[s.name, s.size, s.mtime_ms] for s in self.group_segments]
        body["files"] = {k: list(v) for k, v in self.files.items()}
        return json.dumps({"format": FORMAT, **body}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> "Manifest":
        try:
            body = json.loads(text)
            if body.get("format") != FORMAT:
                raise ValueError(f"format {body.get('format')!r}, this mirrorlag reads {FORMAT}")
            return cls(
                day=date.fromisoformat(body["day"]), run=str(body["run"]), final=bool(body["final"]),
                segments=tuple(Segment(str(n), int(s), int(m)) for n, s, m in body["segments"]),
                files={str(k): tuple(str(f) for f in v) for k, v in body["files"].items()},
                max_gap_seconds=float(body["max_gap_seconds"]), written_ms=int(body["written_ms"]),
                # absent from manifests written before the groups' history was an input
                group_segments=tuple(Segment(str(n), int(s), int(m)) for n, s, m in body.get("group_segments", ())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise RollupError(f"{where}: not a rollup manifest ({exc}); delete it to roll that day up again") from None


def manifest_name(day: date) -> str:
    return f"date={day.isoformat()}.json"


def day_end_ms(day: date) -> int:
    end = datetime(day.year, day.month, day.day, tzinfo=timezone.utc) + timedelta(days=1)
    return int(end.timestamp() * 1000)


def is_final(day: date, segments: Sequence[Segment], now_ms: int, settle_ms: int) -> bool:
    """Over, and its newest input older than the upload lag allows: more is not expected."""
    return provisional_why(day, segments, now_ms, settle_ms) is None


def _age(ms: int) -> str:
    s = max(0, ms) / 1000
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def provisional_why(day: date, segments: Sequence[Segment], now_ms: int, settle_ms: int) -> str | None:
    """Why the day is provisional, in words (None: final)."""
    if now_ms < day_end_ms(day):
        at = datetime.fromtimestamp(now_ms / 1000, timezone.utc)
        return (f"the day was not over when it was rolled up ({at:%Y-%m-%d %H:%M} UTC): "
                "the history of the rest of the day is still to come")
    newest = max((s.mtime_ms for s in segments), default=0)
    if now_ms - newest < settle_ms:
        return (f"its newest history segment was written {_age(now_ms - newest)} before it was rolled up, less than "
                f"the settle time ({_age(settle_ms)}, --settle-minutes): segments still being uploaded may be missing")
    return None


class Action(Enum):
    ROLL = "roll"  # never rolled up, inputs changed, or asked for
    UNCHANGED = "unchanged"  # the manifest's inputs, already final (or still provisional)
    KEEP = "kept"  # inputs lost since (expired?): the committed day read more; not replaced
    REFUSE = "refused"  # the same, asked for explicitly without --force: an error
    NONE = "none"  # no input, nothing committed


@dataclass(frozen=True)
class Decision:
    action: Action
    final: bool = False
    why: str = ""


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} B"


def _inputs(segments: Sequence[Segment], group_segments: Sequence[Segment]) -> str:
    said = f"{len(segments)} segments ({_size(sum(s.size for s in segments))})"
    if group_segments:
        said += f" and {len(group_segments)} group segments ({_size(sum(s.size for s in group_segments))})"
    return said


def lost_inputs(previous: Manifest, segments: Sequence[Segment],
                group_segments: Sequence[Segment] = ()) -> list[Segment]:
    """Segments the committed day read (the partitions' and the groups') that are gone or smaller now."""
    lost = []
    for before, listed in ((previous.segments, segments), (previous.group_segments, group_segments)):
        now = {s.name: s.size for s in listed}
        lost += [s for s in before if now.get(s.name, -1) < s.size]
    return lost


def decide(day: date, previous: Manifest | None, segments: Sequence[Segment], *, now_ms: int, settle_ms: int,
           max_gap_seconds: float, asked: bool, force: bool, group_segments: Sequence[Segment] = ()) -> Decision:
    """What a run does with a day. `asked`: named by --date/--from (re-rolled even if unchanged);
    otherwise the day is in the lookback and rolled only when it is new or changed. The groups'
    segments count as inputs like the partitions', but a day with only group rows has nothing to
    roll up (its tables are the partitions')."""
    final = is_final(day, [*segments, *group_segments], now_ms, settle_ms)
    if not segments:
        return Decision(Action.KEEP if previous else Action.NONE, previous.final if previous else False,
                        "no input now; the committed day is kept" if previous else "no history")
    if previous is None:
        return Decision(Action.ROLL, final, "never rolled up")
    lost = lost_inputs(previous, segments, group_segments)
    if lost and not force:
        before, now = (previous.segments, previous.group_segments), (segments, group_segments)
        why = (f"it was rolled up from {_inputs(*before)} and {len(lost)} of them are gone or smaller now "
               f"({_inputs(*now)}: expired?); replacing it would lose data")
        return Decision(Action.REFUSE if asked else Action.KEEP, previous.final, why)
    if asked or force:
        return Decision(Action.ROLL, final, "asked for")
    if tuple(sorted(segments)) != tuple(sorted(previous.segments)):
        return Decision(Action.ROLL, final, "inputs changed")
    if tuple(sorted(group_segments)) != tuple(sorted(previous.group_segments)):
        return Decision(Action.ROLL, final, "the consumer groups' inputs changed")
    if previous.max_gap_seconds != max_gap_seconds:
        return Decision(Action.ROLL, final, "--max-gap-seconds changed")
    if not previous.final and final:
        return Decision(Action.ROLL, final, "now final")
    return Decision(Action.UNCHANGED, previous.final, "unchanged")


TREND_DAYS = 56  # the longest trend window (trend_rule.WINDOW): a day's change reaches this far


def trend_dependents(rolled: Sequence[date], committed: Sequence[date]) -> list[date]:
    """Committed days, not rolled up again in this run, whose trends read a day that was."""
    again = set(rolled)
    return sorted(d for d in set(committed) - again
                  if any(r < d <= r + timedelta(days=TREND_DAYS - 1) for r in again))
