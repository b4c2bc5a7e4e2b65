"""`mirrorlag check --strimzi` against the real (tansu) brokers: a KafkaMirrorMaker2 resource alone
names the flow, its clusters and topics, and the Connect worker's offsets topic, in which the
connect-offsets feed finds what Strimzi's `<source>-><target>.MirrorSourceConnector` committed. The
check answers the same lag as with the equivalent mm2.properties."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.integration.test_feeds import create_topic, offset_record, produce

pytestmark = pytest.mark.integration

RESOURCE = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: mm2
spec:
  replicas: 1
  target:
    alias: {target}
    bootstrapServers: {target_servers}
    groupId: mm2-{tag}
    configStorageTopic: mm2-{tag}-configs
    offsetStorageTopic: mm2-{tag}-offsets
    statusStorageTopic: mm2-{tag}-status
  mirrors:
    - source:
        alias: {source}
        bootstrapServers: {source_servers}
      topicsPattern: "{topic}"
      sourceConnector:
        config:
          offset-syncs.topic.location: target
      checkpointConnector:
        config:
          offset-syncs.topic.location: target
"""


def _check(*args: str) -> list[dict]:
    result = subprocess.run([sys.executable, "-m", "mirrorlag", "check", "--json", "--timeout", "9", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1, 2), (result.returncode, result.stdout, result.stderr)  # a verdict, not UNKNOWN
    return json.loads(result.stdout)


def test_check_reads_the_lag_of_the_resources_flow_from_its_connect_offsets(tmp_path, clusters, topic_name):
    tag = uuid.uuid4().hex[:8]
    source, target = f"s{tag}", f"d{tag}"
    clusters.create_topic(topic_name, 2)
    clusters.produce(topic_name, {0: 10, 1: 4})
    offsets_topic = f"mm2-{tag}-offsets"
    create_topic(clusters, offsets_topic, 3)
    connector = f"{source}->{target}.MirrorSourceConnector"  # the name Strimzi's operator gives it
    produce(clusters, offsets_topic, [offset_record(source, topic_name, 0, 6, connector),
                                      offset_record(source, topic_name, 1, 3, connector),
                                      # another connector's key in the same topic is not ours
                                      offset_record(source, topic_name, 0, 0, f"{source}->{target}.Other")])
    resource = tmp_path / "kafkamirrormaker2.yaml"
    resource.write_text(RESOURCE.format(tag=tag, source=source, target=target, topic=topic_name,
                                        source_servers=clusters.source, target_servers=clusters.target))
    own = tmp_path / "mirrorlag.properties"
    own.write_text("mirrorlag.lro.feeds = connect-offsets\n")

    rows = {r["partition"]: r for r in _check("--strimzi", str(resource), "--config", str(own))}
    assert {p: (r["flow"], r["topic"], r["leo"], r["lro"], r["lro_feed"], r["record_lag"]) for p, r in rows.items()} == {
        0: (f"{source}->{target}", topic_name, 10, 6, "connect-offsets", 3),
        1: (f"{source}->{target}", topic_name, 4, 3, "connect-offsets", 0),
    }

    # The same flow written out as mm2.properties by hand reads the same.
    mm2 = tmp_path / "mm2.properties"
    mm2.write_text(f"clusters = {target}, {source}\n{source}.bootstrap.servers = {clusters.source}\n"
                   f"{target}.bootstrap.servers = {clusters.target}\n{source}->{target}.enabled = true\n"
                   f"{source}->{target}.topics = {topic_name}\n{target}.offset.storage.topic = {offsets_topic}\n")
    by_hand = {r["partition"]: (r["lro"], r["record_lag"]) for r in _check("--config", str(mm2), "--config", str(own))}
    assert by_hand == {p: (r["lro"], r["record_lag"]) for p, r in rows.items()}
