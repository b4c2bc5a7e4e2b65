"""`--strimzi`: a Strimzi KafkaMirrorMaker2 resource read as the MM2 properties it stands for
(mirrorlag/config/strimzi.py). Every Strimzi example resource the reader claims (tests/data/strimzi,
v1 and v1beta2) validates against the matching CRD schema and reads as the flows, clusters, filters,
offsets topic and client security the operator configures from it; a mistake is one error naming
the file, the line and the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mirrorlag.config.loader import load_settings
from mirrorlag.config.strimzi import StrimziSource, read_strimzi
from mirrorlag.config.yaml_lines import load_documents
from mirrorlag.errors import ConfigError
from tests.deploy.common import strimzi_validator

DATA = Path(__file__).resolve().parent.parent / "data" / "strimzi"
EXAMPLES = sorted(DATA.glob("v*/*.yaml"))
CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    """Secrets mounted as Kubernetes mounts them: one dir per Secret, one file per key, plus ..data."""
    root = tmp_path / "secrets"
    for name in ("cluster-a-cluster-ca-cert", "cluster-b-cluster-ca-cert"):
        (root / name).mkdir(parents=True)
        (root / name / "ca.crt").write_text(CA)
        (root / name / "ca.password").write_text("not-a-cert")
        (root / name / "..data").mkdir()
    return root


def _load(resource: Path, secrets_dir: Path, *configs: Path):
    return load_settings(list(configs), StrimziSource(resource, secrets_dir=secrets_dir))


# --- Strimzi's own examples -----------------------------------------------------------------------


def test_the_examples_are_all_there():
    assert {_id(p) for p in EXAMPLES} == {f"{v}/kafka-mirror-maker-2{s}" for v in ("v1", "v1beta2")
                                         for s in ("", "-tls", "-sync-groups", "-custom-replication-policy")}


@pytest.mark.parametrize("example", EXAMPLES, ids=_id)
def test_every_example_validates_against_its_crd_schema(example):
    (resource,) = load_documents(example)
    version = resource["apiVersion"].partition("/")[2]
    assert version == example.parent.name
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in strimzi_validator(version).iter_errors(resource)]
    assert not errors, errors


@pytest.mark.parametrize("example", EXAMPLES, ids=_id)
def test_every_example_reads_as_the_operator_configures_it(example, secrets, caplog):
    settings = _load(example, secrets)
    assert not [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]  # nothing misread, nothing unknown
    v1 = example.parent.name == "v1"
    assert list(settings.clusters) == ["cluster-b", "cluster-a"]  # the target first, as Strimzi lists them
    tls = "-tls" in example.stem
    port = 9093 if tls else 9092
    for alias in ("cluster-a", "cluster-b"):
        client = settings.clusters[alias].client
        assert client["bootstrap.servers"] == f"{alias}-kafka-bootstrap:{port}"
        assert client.get("security.protocol", "PLAINTEXT") == ("SSL" if tls else "PLAINTEXT")
        assert client.get("ssl.ca.pem") == (CA if tls else None)  # pattern *.crt: ca.crt, not ca.password
    (flow,) = settings.flows
    assert (flow.source, flow.target) == ("cluster-a", "cluster-b")
    assert flow.topics_include.pattern == "(?:.*)" and flow.groups_include.pattern == "(?:.*)"
    # The Connect worker's offsets topic, where "cluster-a->cluster-b.MirrorSourceConnector" commits.
    plain = example.stem == "kafka-mirror-maker-2"
    expected_topic = ("__my-mirror-maker-2-offset" if plain else "my-mirror-maker-2-offset") if v1 \
        else "mirrormaker2-cluster-offsets"
    assert flow.connect_offsets_topic == expected_topic
    # Only the v1 basic example moves the offset syncs to the target (in both connectors).
    assert flow.offset_syncs_topic_location == ("target" if v1 and plain else "source")
    assert flow.policy.identity is ("custom-replication-policy" in example.stem)
    assert flow.sync_group_offsets is ("sync-groups" in example.stem)
    assert flow.emit_checkpoints and flow.emit_checkpoints_interval_s == 60
    assert settings.files[0] == example


def test_the_tls_example_needs_its_secrets_mounted(tmp_path):
    example = DATA / "v1" / "kafka-mirror-maker-2-tls.yaml"
    with pytest.raises(ConfigError) as err:
        _load(example, tmp_path / "nowhere")
    assert str(err.value).startswith(f"{example}:17: spec.target.tls.trustedCertificates[0]: cannot list "
                                     f"{tmp_path / 'nowhere' / 'cluster-b-cluster-ca-cert'}")
    assert "mount the Secret cluster-b-cluster-ca-cert" in str(err.value)


# --- mirrorlag's own keys and overrides, layered on top ---------------------------------------------


def test_properties_files_layer_over_the_resource(tmp_path, secrets):
    own = tmp_path / "mirrorlag.properties"
    own.write_text("mirrorlag.http.listener = :9999\nreplication.lag.time.max.ms = 8000\n"
                   "cluster-a.bootstrap.servers = 10.0.0.1:9092\n")
    example = DATA / "v1" / "kafka-mirror-maker-2.yaml"
    settings = _load(example, secrets, own)
    assert settings.http_port == 9999
    assert settings.flows[0].engine.lag_time_max_s == 8.0
    assert settings.clusters["cluster-a"].bootstrap_servers == "10.0.0.1:9092"
    assert settings.files == (example, own)
    shown = {f.key: f.file for f in settings.non_defaults}
    assert shown["cluster-a->cluster-b.offset-syncs.topic.location"] == example and shown["mirrorlag.http.listener"] == own


# --- what the operator does with the rest of the resource ------------------------------------------


def _write(tmp_path: Path, text: str, name: str = "kmm2.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


V1 = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: {name}
spec:
  replicas: 1
  target:
    alias: dr
    bootstrapServers: dr-kafka-bootstrap:9093
    groupId: g
    configStorageTopic: c
    offsetStorageTopic: o
    statusStorageTopic: s
    tls:
      trustedCertificates:
        - secretName: dr-ca
          certificate: ca.crt
    authentication:
{target_auth}
    config:
      offset.flush.interval.ms: 5000
      exactly.once.source.support: enabled
  mirrors:
    - source:
        alias: east
        bootstrapServers: east-kafka-bootstrap:9092
{source_auth}
      topicsPattern: "orders.*"
      topicsExcludePattern: "orders\\\\.tmp.*"
      groupsExcludePattern: "console-.*"
      sourceConnector:
        config:
          offset-syncs.topic.location: target
          replication.policy.separator: "_"
          groups: "ignored-by-the-source-connector"
    - source:
        alias: west
        bootstrapServers: west-kafka-bootstrap:9092
      sourceConnector: {{}}
"""
SCRAM = """\
      type: scram-sha-512
      username: mirror
      passwordSecret:
        secretName: mirror-user
        password: password"""


def _v1(tmp_path: Path, target_auth: str = SCRAM, source_auth: str = "", name: str = "mm2") -> Path:
    return _write(tmp_path, V1.format(name=name, target_auth=target_auth, source_auth=source_auth))


@pytest.fixture
def v1_secrets(tmp_path: Path) -> Path:
    root = tmp_path / "mounted"
    for secret, files in {"dr-ca": {"ca.crt": CA}, "mirror-user": {"password": 'p"a\\ss'},
                          "east-user": {"user.crt": CA, "user.key": KEY}, "east-plain": {"pw": "east-pw"}}.items():
        (root / secret).mkdir(parents=True)
        for name, text in files.items():
            (root / secret / name).write_text(text)
    return root


def test_v1_security_flows_filters_and_worker_keys(tmp_path, v1_secrets):
    tls_auth = """\
        tls: {}
        authentication:
          type: tls
          certificateAndKey: {secretName: east-user, certificate: user.crt, key: user.key}"""
    settings = _load(_v1(tmp_path, source_auth=tls_auth), v1_secrets)
    dr, east, west = (settings.clusters[a].client for a in ("dr", "east", "west"))
    assert dr["security.protocol"] == "SASL_SSL" and dr["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert (dr["sasl.username"], dr["sasl.password"]) == ("mirror", 'p"a\\ss')  # quoted into JAAS and back
    assert dr["ssl.ca.pem"] == CA
    assert east["security.protocol"] == "SSL" and east["ssl.certificate.pem"] == CA and east["ssl.key.pem"] == KEY
    assert west.get("security.protocol", "PLAINTEXT") == "PLAINTEXT"
    flows = {f.source: f for f in settings.flows}
    assert set(flows) == {"east", "west"} and {f.target for f in settings.flows} == {"dr"}
    east_flow, west_flow = flows["east"], flows["west"]
    assert east_flow.topics_include.pattern == "(?:orders.*)"
    assert east_flow.topics_exclude.pattern == r"(?:orders\.tmp.*)"
    # groups in sourceConnector.config reaches only the source connector: MM2's default stays.
    assert east_flow.groups_exclude.pattern == "(?:console-.*)" and east_flow.groups_include.pattern == "(?:.*)"
    assert east_flow.offset_syncs_topic_location == "target" and east_flow.policy.separator == "_"
    assert west_flow.offset_syncs_topic_location == "source" and west_flow.policy.separator == "."
    assert not east_flow.emit_checkpoints  # no checkpointConnector: the operator runs none
    for flow in settings.flows:
        assert flow.connect_offsets_topic == "o"
        assert flow.offset_flush_interval_s == 5.0 and flow.target_transactional


def test_plain_and_scram_sha_256(tmp_path, v1_secrets):
    plain = """\
        authentication:
          type: plain
          username: east
          passwordSecret: {secretName: east-plain, password: pw}"""
    settings = _load(_v1(tmp_path, target_auth=SCRAM.replace("512", "256"), source_auth=plain), v1_secrets)
    assert settings.clusters["dr"].client["sasl.mechanisms"] == "SCRAM-SHA-256"
    east = settings.clusters["east"].client
    assert east["security.protocol"] == "SASL_PLAINTEXT" and east["sasl.mechanisms"] == "PLAIN"
    assert (east["sasl.username"], east["sasl.password"]) == ("east", "east-pw")


def test_one_resource_of_several_by_name(tmp_path, v1_secrets):
    text = V1.format(name="one", target_auth=SCRAM, source_auth="") + "---\n" + \
        V1.format(name="two", target_auth=SCRAM, source_auth="").replace("alias: east", "alias: north")
    path = _write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n" + text)
    with pytest.raises(ConfigError, match=r"kmm2.yaml:\d+: 2 KafkaMirrorMaker2 resources \(one, two\): pick one "
                                          r"with --strimzi .*kmm2.yaml#<metadata.name>"):
        load_settings([], StrimziSource(path, secrets_dir=v1_secrets))
    settings = load_settings([], StrimziSource.parse(f"{path}#two", v1_secrets))
    assert {f.source for f in settings.flows} == {"north", "west"}
    with pytest.raises(ConfigError, match="no KafkaMirrorMaker2 resource named three"):
        load_settings([], StrimziSource.parse(f"{path}#three", v1_secrets))


V1BETA2 = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: mm2
spec:
  connectCluster: dr
  clusters:
    - alias: east
      bootstrapServers: east:9092
    - alias: dr
      bootstrapServers: dr:9092
      config:
        offset.storage.topic: dr-offsets
        group.id: dr-group
  mirrors:
    - sourceCluster: east
      targetCluster: dr
      topicsBlacklistPattern: "tmp.*"
      heartbeatConnector: {}
      checkpointConnector:
        config:
          emit.checkpoints.interval.seconds: 5
          offset-syncs.topic.location: target
"""


def test_v1beta2_worker_topic_from_the_connect_clusters_config(tmp_path, caplog):
    settings = load_settings([], StrimziSource(_write(tmp_path, V1BETA2), secrets_dir=tmp_path))
    (flow,) = settings.flows
    assert (flow.source, flow.target, flow.connect_offsets_topic) == ("east", "dr", "dr-offsets")
    assert flow.topics_exclude.pattern == "(?:tmp.*)"  # the deprecated field, as the operator reads it
    assert flow.emit_checkpoints_interval_s == 5
    # The checkpoint connector's syncs location differs from the source connector's: said, not used.
    assert flow.offset_syncs_topic_location == "source"
    assert any("kmm2.yaml:23: spec.mirrors[0].checkpointConnector.config.offset-syncs.topic.location = target "
               "differs from the sourceConnector's (unset)" in r.getMessage() for r in caplog.records)


# --- mistakes: one error naming the file, the line and the field ------------------------------------


@pytest.mark.parametrize("text,line,message", [
    (V1BETA2.replace("connectCluster: dr", "connectCluster: dc"), 6,
     "spec.connectCluster: connectCluster with alias dc cannot be found in spec.clusters"),
    (V1BETA2.replace("targetCluster: dr", "targetCluster: east"), 17,
     "spec.mirrors[0].targetCluster: east is not the target cluster (dr, the connectCluster)"),
    (V1BETA2.replace("sourceCluster: east", "sourceCluster: west"), 16,
     "spec.mirrors[0].sourceCluster: no cluster with alias west in spec.clusters"),
    (V1BETA2.replace("  connectCluster: dr\n", ""), 5,
     "spec: either target (v1) or connectCluster and clusters (v1beta2) are required"),
    (V1BETA2.replace("sourceCluster: east", "sourceCluster: dr"), 5,
     "spec: the target and source cluster aliases must be unique"),
    (V1BETA2.replace('"tmp.*"', '"tmp(.*"'), 18, "spec.mirrors[0].topicsBlacklistPattern (east->dr.topics.exclude): "),
    (V1BETA2.replace("kafka.strimzi.io/v1beta2", "kafka.strimzi.io/v1alpha1"), 1,
     "apiVersion: kafka.strimzi.io/v1alpha1 is not read (mirrorlag reads v1, v1beta2)"),
    (V1BETA2.replace("      bootstrapServers: east:9092\n", ""), 8, "spec.clusters[0]: bootstrapServers is required"),
    (V1BETA2.replace("  mirrors:", "  mirrors: []\n  x:"), 15, "spec.mirrors: at least one mirror is required"),
    (V1BETA2.replace("    - alias: east", "    - alias: east\n  - oops"), 9, "not valid YAML: "),
    (V1.format(name="m", target_auth="      type: oauth", source_auth=""), 19,
     "spec.target.authentication.type: authentication type oauth is not supported"),
    (V1.format(name="m", target_auth=SCRAM, source_auth="").replace("    offsetStorageTopic: o\n", ""), 7,
     "spec.target: offsetStorageTopic is required"),
    (V1.format(name="m", target_auth=SCRAM, source_auth="").replace("    tls:", "    tlz:"), 21,
     "spec.target.authentication.passwordSecret: cannot read "),
])
def test_a_mistake_is_one_error_at_its_line(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_settings([], StrimziSource(path, secrets_dir=tmp_path / "none"))
    assert str(err.value).startswith(f"{path}:{line}: {message}"), str(err.value)


def test_no_resource_in_the_file(tmp_path):
    path = _write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: no KafkaMirrorMaker2 resource \(apiVersion"):
        read_strimzi(StrimziSource(path))


def test_through_the_cli_one_line_and_the_exit_status_of_a_config_error(tmp_path):
    path = _write(tmp_path, V1BETA2.replace("connectCluster: dr", "connectCluster: dc"))
    expected = f"{path}:6: spec.connectCluster: connectCluster with alias dc cannot be found in spec.clusters"
    check = subprocess.run([sys.executable, "-m", "mirrorlag", "check", "--strimzi", str(path), "--timeout", "2"],
                           capture_output=True, text=True, timeout=60)
    run = subprocess.run([sys.executable, "-m", "mirrorlag", "run", "--strimzi", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert (check.returncode, run.returncode) == (3, 2)
    assert check.stdout.splitlines()[0] == f"MIRRORLAG UNKNOWN - {expected}"
    assert check.stderr.strip() == run.stderr.strip() == f"mirrorlag: error: {expected}"


def test_run_and_check_need_config_or_strimzi():
    run = subprocess.run([sys.executable, "-m", "mirrorlag", "run"], capture_output=True, text=True, timeout=60)
    check = subprocess.run([sys.executable, "-m", "mirrorlag", "check"], capture_output=True, text=True, timeout=60)
    lone = subprocess.run([sys.executable, "-m", "mirrorlag", "run", "--config", "x.properties", "--strimzi-secrets", "/s"],
                          capture_output=True, text=True, timeout=60)
    assert (run.returncode, check.returncode, lone.returncode) == (2, 3, 2)
    assert run.stderr.strip() == "mirrorlag: error: the following arguments are required: --config/-c (or --strimzi)"
    assert "(or --strimzi, or --url)" in check.stdout.splitlines()[0]
    assert lone.stderr.strip() == "mirrorlag: error: --strimzi-secrets needs --strimzi"


def test_a_misspelt_field_is_named_not_silently_dropped(tmp_path, caplog):
    path = _write(tmp_path, V1BETA2.replace("topicsBlacklistPattern", "topicPattern"))
    (flow,) = load_settings([], StrimziSource(path, secrets_dir=tmp_path)).flows
    assert flow.topics_include.pattern == "(?:.*)"  # as Strimzi runs it: the field is pruned
    assert [r.getMessage() for r in caplog.records if "not a field" in r.getMessage()] == [
        f"{path}:18: spec.mirrors[0].topicPattern is not a field of a KafkaMirrorMaker2 (Kubernetes drops it); ignored"]
