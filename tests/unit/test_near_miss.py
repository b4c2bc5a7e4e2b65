"""Did-you-mean warnings for misspelt MM2 / KIP-971 keys (issue 31): the pure check, the warning
the loader logs, and no word about the keys real mm2.properties files carry."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import javaproperties
import pytest

from mirrorlag.config import load_settings
from mirrorlag.config.known_keys import VALID_KEYS
from mirrorlag.config.loader import FLOW_KEYS, GLOBAL_KEYS
from mirrorlag.config.near_miss import near_misses

ROOT = Path(__file__).resolve().parents[2]
READ = {*FLOW_KEYS, *GLOBAL_KEYS}
ALIASES = ("A", "B")

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def suggestions(*keys: str) -> dict[str, str]:
    return {m.key: m.suggestion for m in near_misses(keys, ALIASES, READ)}


@pytest.mark.parametrize(("key", "meant"), [
    ("replication.lag.time.max", "replication.lag.time.max.ms"),  # the two
    ("replication.record.lag.metric.refresh.intervall", "replication.record.lag.metric.refresh.interval"),
    ("replication.record.lag.metric.last.replicated.offset.tll", "replication.record.lag.metric.last.replicated.offset.ttl"),
    ("replica.lag.time.max.ms", "replication.lag.time.max.ms"),  # the broker's name: not read from mm2.properties
    ("metrics.sample.window", "metrics.sample.window.ms"),
    ("metric.num.samples", "metrics.num.samples"),
    ("offset.lag.maxx", "offset.lag.max"),
    ("emit.offset.syncs.enabled", "emit.offset-syncs.enabled"),
    ("offset.syncs.topic.location", "offset-syncs.topic.location"),
    ("topic", "topics"),
    ("topics.exlude", "topics.exclude"),
    ("cluster", "clusters"),
    ("Clusters", "clusters"),  # Java's keys are case-sensitive
    ("A->B.Replication.Lag.Time.Max.Ms", "A->B.replication.lag.time.max.ms"),
    ("replication.policy.seperator", "replication.policy.separator"),
    # with a flow's or a cluster's prefix, and behind a client prefix: the same prefix in the answer
    ("A->B.replication.lag.time.max", "A->B.replication.lag.time.max.ms"),
    ("A->B.enable", "A->B.enabled"),
    ("A.bootstrap.server", "A.bootstrap.servers"),
    ("B.offset.flush.interval", "B.offset.flush.interval.ms"),
    ("A.consumer.isolaton.level", "A.consumer.isolation.level"),
    ("A->B.source.consumer.auto.offset.rest", "A->B.source.consumer.auto.offset.reset"),
    ("A.admin.request.timeout", "A.admin.request.timeout.ms"),
])
def test_a_near_miss_names_the_key_meant(key: str, meant: str) -> None:
    assert suggestions(key) == {key: meant}


@pytest.mark.parametrize("key", [
    # the keys themselves, at every level
    "replication.lag.time.max.ms", "A->B.replication.lag.time.max.ms", "A->B.enabled", "A.bootstrap.servers",
    "A.consumer.isolation.level", "A->B.source.consumer.isolation.level", "A.admin.request.timeout.ms",
    # documented keys that are close to one mirrorlag reads
    "groups.exclude", "offset.flush.timeout.ms", "config.storage.topic", "status.storage.topic",
    "emit.checkpoints.enabled", "emit.heartbeats.enabled", "offset-syncs.topic.replication.factor",
    "sasl.mechanisms", "exactly.once.support", "B.exactly.once.support", "A->B.emit.heartbeats.enabled",
    "admin.timeout.ms", "consumer.poll.timeout.ms", "A->B.producer.override.linger.ms",
    # a known key behind an alias that is not in `clusters` (a cluster taken out of the mirror)
    "old.bootstrap.servers", "old.offset.flush.interval.ms",
    # free-form families and far-off names
    "config.providers.vault.param.address", "transforms.route.regex", "mirrorlag.anything",
    "emit.checkpoints.interval.seconds", "some.plugin.setting",
])
def test_known_and_far_keys_are_no_near_miss(key: str) -> None:
    assert suggestions(key) == {}


def test_the_loaders_keys_and_mm2s_are_disjoint_from_near_misses() -> None:
    """No documented key would ever be flagged, nor any key the loader reads."""
    assert near_misses(sorted(VALID_KEYS | READ), ALIASES, READ) == []


def _shipped_properties() -> list[tuple[str, str]]:
    """Every .properties text in config/ and deploy/, and the properties blocks of the k8s YAML."""
    texts = [(str(p.relative_to(ROOT)), p.read_text()) for d in ("config", "deploy") for p in (ROOT / d).rglob("*.properties")]
    for manifest in (ROOT / "deploy").rglob("*.yaml"):
        for block in re.findall(r"\.properties: \|\n((?:    .*\n|\n)+)", manifest.read_text()):
            texts.append((str(manifest.relative_to(ROOT)), block))
    return texts


@pytest.mark.parametrize("name", ["realistic.properties"])
def test_a_big_realistic_mm2_file_gets_no_warning(name: str) -> None:
    props = javaproperties.loads((ROOT / "tests/data/mm2" / name).read_text())
    assert len(props) >= 100
    aliases = [a.strip() for a in props["clusters"].split(",")]
    assert near_misses(props, aliases, READ) == []


def test_the_shipped_files_get_no_warning() -> None:
    shipped = _shipped_properties()
    assert any("config/mm2.properties" in name for name, _ in shipped)
    assert any(name.endswith("mm2-with-mirrorlag.yaml") for name, _ in shipped)
    for name, text in shipped:
        props = javaproperties.loads(text)
        aliases = [a.strip() for a in props.get("clusters", "").split(",")]
        assert near_misses(props, aliases, READ) == [], name


def test_load_warns_with_file_line_and_what_is_in_force(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "replication.lag.time.max = 8000\n"
                             "replication.record.lag.metric.refresh.intervall = 2000\n"
                             "A->B.offset.lag.maxx = 5\noffset.lag.max = 50\n")
    with caplog.at_level(logging.WARNING, logger="mirrorlag"):
        settings = load_settings([config])
    assert settings.flows[0].engine.lag_time_max_s == 30.0  # the typo changed nothing: the warning says so
    assert settings.refresh_interval_s == 15.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"{config}:5: unknown key 'replication.lag.time.max'; did you mean 'replication.lag.time.max.ms'? "
        "(MirrorMaker ignores unknown keys; mirrorlag reads 'replication.lag.time.max.ms', here its default 30000)",
        f"{config}:6: unknown key 'replication.record.lag.metric.refresh.intervall'; did you mean "
        "'replication.record.lag.metric.refresh.interval'? (MirrorMaker ignores unknown keys; mirrorlag reads "
        "'replication.record.lag.metric.refresh.interval', here its default 15000)",
        f"{config}:7: unknown key 'A->B.offset.lag.maxx'; did you mean 'A->B.offset.lag.max'? (MirrorMaker "
        f"ignores unknown keys; mirrorlag reads 'A->B.offset.lag.max', here from offset.lag.max at {config}:8)",
    ]
    assert all(r.name.startswith("mirrorlag.") for r in caplog.records)


def test_a_correct_file_loads_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(BASE + "replication.lag.time.max.ms = 8000\nreplication.factor = 1\nsync.topic.acls.enabled = false\n")
    with caplog.at_level(logging.WARNING, logger="mirrorlag"):
        assert load_settings([config]).flows[0].engine.lag_time_max_s == 8.0
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []

