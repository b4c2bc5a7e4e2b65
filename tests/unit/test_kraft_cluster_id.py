"""KRaft cluster ids for the Apache Kafka tier: kafka-storage reads one starting with "-" as an option."""

from __future__ import annotations

import base64
import uuid

import pytest

from mirrorlag.apache_kafka import processes


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))  # encodes as "-wAAAA..."
    assert base64.urlsafe_b64encode(dash_first.bytes).decode().startswith("-")
    plain = uuid.UUID(bytes=bytes(16))
    drawn = iter([dash_first, dash_first, plain])
    monkeypatch.setattr(processes.uuid, "uuid4", lambda: next(drawn))
    assert processes._cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"


def test_cluster_ids_are_kafka_uuids() -> None:
    ids = {processes._cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
