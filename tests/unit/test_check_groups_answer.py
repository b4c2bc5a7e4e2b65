"""`check --groups`'s answer (check_groups.answer): the exit status and, for a flow whose groups
could not be read, an UNKNOWN that says which flow and why (its JSON lists every flow, as the
partition check's lists its clusters)."""

from __future__ import annotations

import json

from mirrorlag.check.groups import EXIT_OK, EXIT_UNKNOWN, answer
from mirrorlag.groups.monitor import FlowGroups, GroupsSnapshot
from mirrorlag.model import FlowId

AB, AC = FlowId("A", "B"), FlowId("A", "C")


def test_a_flow_not_read_is_unknown_naming_it_in_text_and_json(capsys):
    snapshot = GroupsSnapshot((FlowGroups(AB, (), 1_000), FlowGroups(AC, (), None, error="source A: timed out")))
    assert answer(snapshot, as_json=False) == EXIT_UNKNOWN
    assert capsys.readouterr().out == "MIRRORLAG UNKNOWN - A->C: source A: timed out\n"
    assert answer(snapshot, as_json=True) == EXIT_UNKNOWN
    body = json.loads(capsys.readouterr().out)
    assert body["status"] == "UNKNOWN" and body["reason"] == "A->C: source A: timed out"
    assert body["flows"] == [
        {"flow": "A->B", "source": "A", "target": "B", "read": True, "error": None},
        {"flow": "A->C", "source": "A", "target": "C", "read": False, "error": "source A: timed out"},
    ]


def test_every_flow_read_and_no_group_is_ok(capsys):
    assert answer(GroupsSnapshot((FlowGroups(AB, (), 1_000),)), as_json=True) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []
