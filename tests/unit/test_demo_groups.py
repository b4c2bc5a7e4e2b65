"""The demo's groups view: a group reads as its worst partition, with its re-read (the sum over its partitions)."""

from rich.console import Console

from mirrorlag.demo.ui import group_summaries, render


def _row(partition: int, state: str, reread: int | None) -> dict:
    return {"group": "audit", "topic": "orders", "partition": partition, "committed": 10, "checkpoint_downstream": 8,
            "resume_source_offset": 8, "reread_records": reread, "not_yet_mirrored_records": 0,
            "checkpoint_age_s": 1.5, "state": state, "because": "no sync at or below" if reread is None else None}


def test_a_group_is_its_worst_partition_with_its_reread_summed():
    status = {"groups": [_row(0, "READY", 2), _row(1, "NOT_CHECKPOINTED", None), _row(2, "REREAD_HIGH", 900)]}
    assert group_summaries(status) == [{"group": "audit", "state": "NOT_CHECKPOINTED", "reread": 902}]
    assert group_summaries({"groups": [_row(1, "UNMAPPED", None)]})[0]["reread"] is None  # none known: not 0
    assert group_summaries({"partitions": []}) == []


def test_the_groups_table_follows_the_partitions_and_takes_the_caption():
    console = Console(width=160, record=True)
    console.print(render({"partitions": [], "groups": [_row(1, "NOT_CHECKPOINTED", None)]}, "the caption"))
    text = console.export_text()
    assert text.index("replication lag per source partition") < text.index("failover readiness") < text.index("the caption")
    assert "NOT_CHECKPOINTED (no sync at or below)" in text
    console = Console(width=160, record=True)
    console.print(render({"partitions": []}, "the caption"))
    text = console.export_text()
    assert "failover readiness" not in text and "the caption" in text

