"""The newest checkpoint of each (group, remote topic, partition), as MM2's checkpoint connector
wrote them to `<source>.checkpoints.internal` on the target. Pure: records in, checkpoints out;
a record that does not decode is counted and skipped, as the feeds do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from mirrorlag.formats import BadRecord, decode_checkpoint, decode_checkpoint_key

CheckpointKey = tuple[str, str, int]  # group, remote topic, partition


class Checkpointed(NamedTuple):
    upstream: int  # the group's source offset MM2 translated
    downstream: int  # where the group would resume on the target
    timestamp_ms: int  # when MM2 read the group's offsets (the record's timestamp)
    metadata: str = ""  # the group's commit metadata MM2 copied into the checkpoint


@dataclass
class CheckpointStore:
    newest: dict[CheckpointKey, Checkpointed] = field(default_factory=dict)
    bad_records: int = 0

    def apply(self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int) -> None:
        try:
            if value is None:  # a tombstone: someone compacted the group away
                self.newest.pop(decode_checkpoint_key(key), None)
                return
            c = decode_checkpoint(key, value)
        except BadRecord:
            self.bad_records += 1
            return
        self.newest[(c.group, c.topic, c.partition)] = Checkpointed(c.upstream_offset, c.downstream_offset, timestamp_ms,
                                                                  c.metadata)

    def groups(self) -> set[str]:
        return {group for group, _, _ in self.newest}
