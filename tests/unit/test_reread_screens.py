"""Issue 42: "'re-read' is a max on one screen and a sum on another". A group's re-read is the sum
over its partitions on every screen that shows one figure a group, labelled so: check --groups'
status line and perfdata, the demo's status line, Prometheus' stat="sum" (the max only as
stat="max") and the rollup report's heading. One set of groups, read back from each screen."""

from __future__ import annotations

import re

from mirrorlag.check.output import groups_verdict
from mirrorlag.demo.runner import _summary
from mirrorlag.demo.ui import group_summaries
from mirrorlag.groups.metrics import GroupsCollector
from mirrorlag.groups.readiness import GroupState
from mirrorlag.groups.rows import group_rows
from mirrorlag.groups.monitor import FlowGroups, GroupsSnapshot
from mirrorlag.model import FlowId
from tests.nagios import parse
from tests.unit.test_check_output import group

FLOW = FlowId("A", "B")
# audit: 1,234 + 1 + unknown = 1,235 (its worst partition 1,234); billing: 40 + 2 = 42.
GROUPS = [group("audit", (GroupState.REREAD_HIGH, 1234), (GroupState.READY, 1), (GroupState.UNMAPPED, None)),
          group("billing", (GroupState.CHECKPOINT_OLD, 40), (GroupState.READY, 2))]
SUMS = {"audit": 1235, "billing": 42}


def test_every_screen_shows_a_groups_reread_as_the_sum_over_its_partitions():
    _, text, perf = parse(groups_verdict([(str(FLOW), g) for g in GROUPS]).line)
    assert dict(re.findall(r"A->B (\w+) \w+ re-read \(sum\) (\d[\d,]*\d|\d)", text)) == {g: f"{s:,}" for g, s in SUMS.items()}
    assert perf["reread_records"][0] == str(max(SUMS.values()))  # the largest of the figures named

    status = {"partitions": [], "groups": group_rows(FLOW, GROUPS)}  # /status's rows, as the demo reads them
    assert {g["group"]: g["reread"] for g in group_summaries(status)} == SUMS
    assert dict(re.findall(r"group (\w+): \w+, re-read \(sum\) (\d+)", _summary(status))) == {
        g: str(s) for g, s in SUMS.items()}

    snapshot = GroupsSnapshot((FlowGroups(FLOW, tuple(GROUPS), read_at_ms=0),))
    samples = {(s.labels["group"], s.labels["stat"]): s.value for m in GroupsCollector(lambda: snapshot, 100).collect()
               for s in m.samples if m.name == "mirrorlag_group_failover_reread_records"}
    assert {g: samples[(g, "sum")] for g in SUMS} == SUMS
    assert {g: samples[(g, "max")] for g in SUMS} == {"audit": 1234, "billing": 40}  # the worst partition, named so


def test_the_rollup_reports_the_groups_reread_as_a_sum():
    """The rollup's samples sum a run's partitions (group_daily); the report's heading says so."""
    import inspect

    from mirrorlag.rollup import group_daily, report

    assert 'F.sum("reread_records").alias("reread")' in inspect.getsource(group_daily)
    assert '("re-read (sum) p50", False)' in inspect.getsource(report._groups)


def test_a_groups_reread_with_none_known_is_unknown_not_zero():
    unmapped = [group("audit", (GroupState.UNMAPPED, None))]
    _, text, perf = parse(groups_verdict([(str(FLOW), g) for g in unmapped]).line)
    assert perf["reread_records"][0] == "U" and "re-read" not in text
    assert group_summaries({"groups": group_rows(FLOW, unmapped)})[0]["reread"] is None
