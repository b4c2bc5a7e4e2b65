"""`mirrorlag check --strimzi` against the real thing: Strimzi's example KafkaMirrorMaker2 (v1) with
this test's clusters, run as Strimzi's operator runs it (a Connect worker in distributed mode on
the target and MirrorMaker 2's connectors configured over REST from the resource,
tests/apache/strimzi_connect.py). mirrorlag, given nothing but the same resource, reads the source
offsets Connect-mode MM2 committed under `<source>-><target>.MirrorSourceConnector` in the
resource's offsetStorageTopic, and answers what the data says: every record copied, lag 0."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from tests.apache.strimzi_connect import ConnectWorker
from tests.apache.truth import NumberedProducer
from tests.deploy.common import strimzi_validator
from tests.helpers import eventually, mirrorlag

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "strimzi" / "v1" / "kafka-mirror-maker-2.yaml"


def _resource(pair, tag: str, topic: str) -> dict:
    """Strimzi's example, pointed at this test's brokers, aliases, topic and worker topics."""
    resource = yaml.safe_load(EXAMPLE.read_text())
    target = resource["spec"]["target"]
    target.update(alias=f"d{tag}", bootstrapServers=pair.target.bootstrap_servers, groupId=f"mm2-{tag}",
                  configStorageTopic=f"__mm2-{tag}-config", offsetStorageTopic=f"__mm2-{tag}-offset",
                  statusStorageTopic=f"__mm2-{tag}-status")
    target["config"]["offset.flush.interval.ms"] = 1000  # commits every second, not Connect's 60
    (mirror,) = resource["spec"]["mirrors"]
    mirror["source"].update(alias=f"s{tag}", bootstrapServers=pair.source.bootstrap_servers)
    mirror["topicsPattern"] = topic
    mirror["groupsPattern"] = f"g-{tag}"
    assert not list(strimzi_validator("v1").iter_errors(resource))
    return resource


def test_check_strimzi_reads_connect_mode_mm2_as_strimzi_runs_it(apache_pair, tmp_path):
    tag = uuid.uuid4().hex[:8]
    topic = f"orders-{tag}"
    clusters = apache_pair.clusters
    clusters.create_topic(topic, 2)
    NumberedProducer(apache_pair.source.bootstrap_servers, topic).produce({0: 20, 1: 7})
    resource = _resource(apache_pair, tag, topic)
    path = tmp_path / "kafkamirrormaker2.yaml"
    path.write_text(yaml.safe_dump(resource, sort_keys=False))
    own = tmp_path / "mirrorlag.properties"
    own.write_text("mirrorlag.lro.feeds = connect-offsets\n")  # this feed alone: Strimzi's offsets topic
    remote = f"s{tag}.{topic}"

    worker = ConnectWorker(apache_pair.jars, tmp_path / "connect", "connect", spec=resource["spec"])
    try:
        worker.start()
        worker.apply()

        def copied() -> None:
            for p, records in ((0, 20), (1, 7)):
                assert clusters.end_offset(remote, p, which="target") == records
        eventually(copied, timeout=120, interval=0.5)

        def checked() -> dict[int, tuple]:
            result = mirrorlag("check", "--strimzi", str(path), "--config", str(own), "--json", "--timeout", "15")
            assert result.returncode in (0, 1, 2), result.stdout + result.stderr
            rows = {r["partition"]: (r["flow"], r["lro_feed"], r["leo"], r["lro"], r["record_lag"], r["state"])
                    for r in json.loads(result.stdout) if r["topic"] == topic}
            assert rows == {0: (f"s{tag}->d{tag}", "connect-offsets", 20, 19, 0, "IN_SYNC"),
                            1: (f"s{tag}->d{tag}", "connect-offsets", 7, 6, 0, "IN_SYNC")}, rows
            return rows
        eventually(checked, timeout=60, interval=1)
    finally:
        worker.stop()
