"""The settings `run` logs at its start (issue 31): every key mirrorlag reads that is not at its
default, with file and line, a secret never shown."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mirrorlag.config import load_settings
from mirrorlag.config.effective import log_effective, shown

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def in_force(tmp_path: Path, *texts: str) -> list[str]:
    files = []
    for i, text in enumerate(texts):
        files.append(tmp_path / f"f{i}.properties")
        files[-1].write_text(text)
    return [str(entry) for entry in load_settings(files).non_defaults]


def test_lists_what_differs_from_the_default_with_file_and_line(tmp_path: Path) -> None:
    lines = in_force(tmp_path, BASE + (
        "replication.lag.time.max.ms = 8000\n"      # 5: differs
        "metrics.num.samples = 2\n"                  # 6: the default, as written
        "offset.lag.max = +100\n"                    # 7: the default, written otherwise
        "replication.factor = 1\n"                   # 8: MM2's key, not read by mirrorlag
        "B->A.topics = x\n"                          # 9: a flow that is not enabled
        "A->B.topics = orders.*\n"                   # 10
        "B.offset.flush.interval.ms = 60000\n"       # 11: Connect's default
        "A.consumer.isolation.level = read_committed\n"  # 12
        "mirrorlag.http.listener = :9464\n"          # 13: every interface, port 9464: the default
        "A->B.mirrorlag.freshness.table.points = 10\n"  # 14: an engine key, per flow
        "A->B.replication.record.lag.metric.refresh.interval = 1000\n"  # 15: global only: ignored
        "offset.flush.interval.ms = 1000\n"         # 16: a worker key, read under <target>. only
    ), "replication.lag.time.max.ms = 9000\nmirrorlag.metrics.detail = lag\n")
    f0, f1 = tmp_path / "f0.properties", tmp_path / "f1.properties"
    assert lines == [
        f"{f0}:1: clusters = A, B",
        f"{f0}:2: A.bootstrap.servers = a:9092",
        f"{f0}:3: B.bootstrap.servers = b:9092",
        f"{f0}:4: A->B.enabled = true",
        f"{f0}:10: A->B.topics = orders.*",
        f"{f0}:12: A.consumer.isolation.level = read_committed",
        f"{f0}:14: A->B.mirrorlag.freshness.table.points = 10",
        f"{f1}:1: replication.lag.time.max.ms = 9000",  # the later file's value, where it was set
        f"{f1}:2: mirrorlag.metrics.detail = lag",
    ]


def test_secrets_are_masked(tmp_path: Path) -> None:
    lines = in_force(tmp_path, BASE + (
        "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n"
        'A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";\n'
        "ssl.key.password = hunter3\n"
        "mirrorlag.history.dir = history\nmirrorlag.history.upload.uri = s3://bucket/p\n"
        "mirrorlag.history.upload.s3.access.key.id = AKIA\nmirrorlag.history.upload.s3.secret.access.key = hunter4\n"
        "mirrorlag.history.upload.s3.session.token = hunter5\n"))
    text = "\n".join(lines)
    assert "A.sasl.jaas.config = ***" in text and "ssl.key.password = ***" in text
    assert "mirrorlag.history.upload.s3.secret.access.key = ***" in text
    assert "mirrorlag.history.upload.s3.session.token = ***" in text
    assert "hunter" not in text
    assert "mirrorlag.history.upload.uri = s3://bucket/p" in text


def test_a_urls_password_is_masked() -> None:
    assert shown("mirrorlag.history.upload.uri", " ftp://me:pw@host/x ") == "ftp://***@host/x"
    assert shown("sasl.password", "pw") == "***"


def test_log_effective_logs_one_line_per_setting(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "ssl.key.password = hunter2\n")
    with caplog.at_level(logging.INFO, logger="mirrorlag"):
        log_effective(load_settings([config]))
    messages = [r.getMessage() for r in caplog.records if r.name == "mirrorlag.config.effective"]
    assert messages[0] == "settings in force that are not at their defaults (5):"
    assert messages[-1] == f"  {config}:5: ssl.key.password = ***"
