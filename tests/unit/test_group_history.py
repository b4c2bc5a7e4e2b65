"""The groups' history rows: /status's group rows encoded to the group schema, nulls kept."""

from mirrorlag.history.group_schema import SCHEMA, encode


def _row(**kw):
    row = {"flow": "east->west", "group": "billing", "topic": "orders", "partition": 3, "committed": 120,
           "checkpoint_upstream": 100, "checkpoint_downstream": 90, "resume_source_offset": 100,
           "reread_records": 20, "skipped_records": 0, "not_yet_mirrored_records": 0, "checkpoint_age_s": 12.3456,
           "state": "READY", "because": None, "active_on_target": False}
    return {**row, **kw}


def test_rows_encode_to_the_schema_with_their_flow_split_and_ages_in_ms():
    batch = encode(1_790_000_000_000, [_row(), _row(partition=4, reread_records=None, resume_source_offset=None,
                                                    checkpoint_age_s=None, state="NOT_CHECKPOINTED",
                                                    because="no sync at or below")], "pod-a:9464", 60_000)
    assert batch.schema == SCHEMA
    first, second = batch.to_pylist()
    assert (first["source"], first["target"], first["partition"], first["checkpoint_age_ms"]) == ("east", "west", 3, 12_346)
    assert (first["writer"], first["refresh_interval_ms"], first["active_on_target"]) == ("pod-a:9464", 60_000, False)
    assert (second["reread_records"], second["checkpoint_age_ms"], second["because"]) == (None, None, "no sync at or below")


def test_a_run_without_groups_is_an_empty_batch():
    assert encode(0, [], None, None).num_rows == 0
