"""Unit tests for mirrorlag.config: loading MM2 .properties files into Settings (docs/design.md §5)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from mirrorlag.config import ClusterSettings, EngineParams, FlowSettings, Settings, load_settings
from mirrorlag.config import loader
from mirrorlag.config.policy import DEFAULT_POLICY, IDENTITY_POLICY
from mirrorlag.errors import ConfigError
from mirrorlag.model import FlowId

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""
NEXT = 5  # the first line after BASE

PEM_BODY = "MIIBszCCAVmgAwIBAgIUQ" * 5  # 105 base64 characters: wraps onto two lines


def write(directory: Path, text: str, name: str = "mm2.properties") -> Path:
    path = directory.resolve() / name
    path.write_bytes(text.encode("latin-1"))
    return path


def load(tmp_path: Path, *texts: str) -> Settings:
    return load_settings([write(tmp_path, text, f"f{i}.properties") for i, text in enumerate(texts)])


def load_error(tmp_path: Path, *texts: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, *texts)
    return info.value


def assert_at(err: ConfigError, file: Path, line: int, key: str) -> str:
    """The error names file, line and key, in its fields and in its one-line message."""
    assert (err.file, err.line, err.key) == (file, line, key)
    message = str(err)
    assert message.startswith(f"{file}:{line}: {key}: "), message
    return message


def f0(tmp_path: Path) -> Path:
    return tmp_path.resolve() / "f0.properties"


def f1(tmp_path: Path) -> Path:
    return tmp_path.resolve() / "f1.properties"


def client(tmp_path: Path, extra: str, alias: str = "B") -> dict[str, str]:
    return dict(load(tmp_path, BASE + extra).clusters[alias].client)


# --- the happy path and defaults --------------------------------------------------------------


def test_minimal_config_gives_defaults(tmp_path: Path) -> None:
    s = load(tmp_path, BASE)
    assert s.files == (f0(tmp_path),)
    assert list(s.clusters) == ["A", "B"]
    assert s.clusters["A"] == ClusterSettings("A", "a:9092", {"bootstrap.servers": "a:9092"})
    assert [f.id for f in s.flows] == [FlowId("A", "B")]
    flow = s.flow(FlowId("A", "B"))
    assert isinstance(flow, FlowSettings)
    assert flow.offset_lag_max == 100
    assert flow.offset_syncs_topic_location == "source"
    assert flow.engine == EngineParams(lag_time_max_s=30.0, sample_window_s=30.0, num_samples=2)
    assert flow.policy.separator == "." and flow.policy.internal_separator_enabled
    assert flow.policy.heartbeats_topic == "heartbeats" and not flow.policy.identity
    assert s.refresh_interval_s == 15.0 and s.lro_ttl_s == 20.0
    assert (s.http_host, s.http_port) == ("0.0.0.0", 9464)
    assert s.leo_isolation is None  # no override: each flow at MM2's own level
    assert s.leo_chunk_size == 250
    assert s.request_timeout_s == 10.0


def test_default_topic_filters(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE).flows[0]
    assert flow.topics_include.fullmatch("orders")
    for excluded in ("a-internal", "a.internal", "orders.replica", "__consumer_offsets"):
        assert flow.topics_exclude.fullmatch(excluded), excluded
    assert not flow.topics_exclude.fullmatch("orders")
    assert flow.should_replicate("orders") and not flow.should_replicate("B.orders")


def test_accepts_str_and_pathlike_and_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BASE)
    monkeypatch.chdir(tmp_path)
    assert load_settings(["mm2.properties"]).files == (path,)
    assert load_settings([Path("mm2.properties")]).files == (path,)
    assert load_settings((str(path),)).files == (path,)


def test_non_mirrorlag_unknown_keys_are_ignored(tmp_path: Path) -> None:
    s = load(tmp_path, BASE + "emit.heartbeats.enabled = false\nA->B.sync.group.offsets.enabled = true\nfoo = bar\n")
    assert len(s.flows) == 1


def test_properties_syntax_colon_continuation_comments_escapes(tmp_path: Path) -> None:
    text = (
        "! bang comment\n"
        "# hash comment\n"
        "clusters : A,\\\n"
        "           B\n"
        "A.bootstrap.servers a:9092\n"
        "B.bootstrap.servers=b\\u003a9092\n"
        "A\\-\\>B.enabled=true\n"
    )
    s = load(tmp_path, text)
    assert s.clusters["B"].bootstrap_servers == "b:9092"
    assert [str(f.id) for f in s.flows] == ["A->B"]


# --- files, layering, line numbers -------------------------------------------------------


def test_later_files_override_key_by_key(tmp_path: Path) -> None:
    s = load(tmp_path, BASE + "offset.lag.max = 5\ntopics = a.*\n", "topics = b.*\nmirrorlag.leo.chunk.size=7\n")
    assert s.files == (f0(tmp_path), f1(tmp_path))
    flow = s.flows[0]
    assert flow.offset_lag_max == 5
    assert flow.topics_include.fullmatch("b1") and not flow.topics_include.fullmatch("a1")
    assert s.leo_chunk_size == 7


def test_error_points_at_the_value_in_force(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "offset.lag.max = 1\n", "# override\n\noffset.lag.max = x\n")
    assert_at(err, f1(tmp_path), 3, "offset.lag.max")
    # ... and a valid later value hides a bad earlier one.
    assert load(tmp_path, BASE + "offset.lag.max = x\n", "offset.lag.max = 3\n").flows[0].offset_lag_max == 3


def test_line_counts_continuations_comments_and_crlf(tmp_path: Path) -> None:
    text = (
        "clusters = A, \\\r\n  B\r\n"  # lines 1-2
        "# comment\r"  # line 3 (old Mac line end)
        "   \n"  # line 4 (blank)
        "A.bootstrap.servers = a:9092\n"  # 5
        "B.bootstrap.servers = \\\n  b:9092\\\n  ,b2:9092\n"  # 6-8
        "A->B.enabled = true\n"  # 9
        "metrics.num.samples = \\\n  0\n"  # 10-11: an entry's line is where it starts
    )
    assert_at(load_error(tmp_path, text), f0(tmp_path), 10, "metrics.num.samples")


@hsettings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.sampled_from(["# c\n", "! c\n", "\n", "   \n", "x = 1\n", "y = a\\\n  b\n", "z=\\\n\\\n  c\r\n", "w\r"]),
        max_size=12,
    )
)
def test_line_numbers_property(tmp_path_factory: pytest.TempPathFactory, filler: list[str]) -> None:
    directory = tmp_path_factory.mktemp("lines")
    text = BASE + "".join(filler) + "mirrorlag.bogus = 1\n"
    expected_line = 1 + len(re.findall(r"\r\n|\r|\n", BASE + "".join(filler)))  # "\r" + "\n" is one
    with pytest.raises(ConfigError) as info:
        load_settings([write(directory, text)])
    assert_at(info.value, directory.resolve() / "mm2.properties", expected_line, "mirrorlag.bogus")


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path.resolve() / "nope.properties"
    with pytest.raises(ConfigError) as info:
        load_settings([write(tmp_path, BASE), missing])
    assert info.value.file == missing
    assert str(info.value).startswith(f"{missing}: cannot read file")


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings([tmp_path])
    assert info.value.file == tmp_path.resolve()
    assert "cannot read file" in str(info.value)


def test_invalid_properties_file(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "ssl.key.password = s3cr\\uZZZZ\n")
    assert (err.file, err.line) == (f0(tmp_path), NEXT)
    assert str(err).startswith(f"{f0(tmp_path)}:{NEXT}: not a valid properties file")
    assert "s3cr" not in str(err) and "ZZZZ" not in str(err)


def test_no_paths() -> None:
    with pytest.raises(ConfigError, match="no configuration file"):
        load_settings([])


def test_files_are_read_as_latin1_like_java(tmp_path: Path) -> None:
    path = tmp_path / "x.properties"
    path.write_bytes(BASE.encode() + "B.client.id = caf\u00e9\n".encode("latin-1"))
    assert load_settings([path]).clusters["B"].client["client.id"] == "caf\u00e9"


# --- clusters and flows --------------------------------------------------------------------


def test_missing_clusters(tmp_path: Path) -> None:
    err = load_error(tmp_path, "A.bootstrap.servers = a:9092\n")
    assert err.key == "clusters" and err.line is None
    assert str(err) == f"clusters: required key is missing (read {f0(tmp_path)})"


def test_empty_clusters(tmp_path: Path) -> None:
    err = load_error(tmp_path, "# x\nclusters = , \n")
    assert "empty" in assert_at(err, f0(tmp_path), 2, "clusters")


def test_clusters_trimmed_and_deduplicated(tmp_path: Path) -> None:
    s = load(tmp_path, BASE.replace("clusters = A, B", "clusters =  B ,A,, B "))
    assert list(s.clusters) == ["B", "A"]


def test_missing_bootstrap_servers(tmp_path: Path) -> None:
    err = load_error(tmp_path, "clusters = A, B, C\nA.bootstrap.servers = a\nB.bootstrap.servers = b\n")
    assert "cluster C has no C.bootstrap.servers" in assert_at(err, f0(tmp_path), 1, "clusters")


def test_empty_bootstrap_servers(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE.replace("b:9092", " , "))
    assert_at(err, f0(tmp_path), 3, "B.bootstrap.servers")


def test_flows_enumerated_in_clusters_order(tmp_path: Path) -> None:
    text = (
        "clusters = B, A, C\n"
        + "".join(f"{c}.bootstrap.servers = {c}:1\n" for c in "ABC")
        + "C->A.enabled = true\nA->B.enabled = true\nB->C.enabled = TRUE\nA->C.enabled = True\n"
        + "C->B.enabled = false\nB->A.enabled = yes\n"
    )
    s = load(tmp_path, text)
    assert [str(f.id) for f in s.flows] == ["B->C", "A->B", "A->C", "C->A"]
    assert s.source_aliases == ("A", "B", "C")
    with pytest.raises(KeyError):
        s.flow(FlowId("C", "B"))


def test_enabled_is_java_parse_boolean(tmp_path: Path) -> None:
    # Boolean.parseBoolean on the raw value: a trailing blank keeps the flow off in MM2 too.
    text = BASE.replace("A->B.enabled = true", "A->B.enabled = true \nB->A.enabled = tRuE")
    assert [str(f.id) for f in load(tmp_path, text).flows] == ["B->A"]


def test_self_flow_is_ignored(tmp_path: Path) -> None:
    assert [str(f.id) for f in load(tmp_path, BASE + "A->A.enabled = true\n").flows] == ["A->B"]


def test_no_enabled_flow(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE.replace("A->B.enabled = true", "A->B.enabled = false"))
    message = assert_at(err, f0(tmp_path), 1, "clusters")
    assert message.endswith("no enabled flow (set e.g. A->B.enabled = true)")


def test_flow_naming_undefined_target(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "A->Z.enabled = true\n")
    assert assert_at(err, f0(tmp_path), NEXT, "A->Z.enabled").endswith("flow A->Z names undefined cluster Z")


def test_flow_naming_undefined_source_in_later_file(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE, "\nX->B.enabled = TRUE\n")
    assert assert_at(err, f1(tmp_path), 2, "X->B.enabled").endswith("flow X->B names undefined cluster X")


def test_flow_naming_two_undefined_clusters(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "X->Y.enabled = true\n")
    assert "undefined clusters X and Y" in assert_at(err, f0(tmp_path), NEXT, "X->Y.enabled")


def test_disabled_or_per_flow_enabled_keys_are_not_flows(tmp_path: Path) -> None:
    text = BASE + "X->Y.enabled = false\nA->B.emit.heartbeats.enabled = true\nA->Z.sync.topic.configs.enabled = true\n"
    assert [str(f.id) for f in load(tmp_path, text).flows] == ["A->B"]


def test_dotted_aliases(tmp_path: Path) -> None:
    text = (
        "clusters = us.east, eu.west\nus.east.bootstrap.servers = e:1\neu.west.bootstrap.servers = w:1\n"
        "us.east->eu.west.enabled = true\nus.east->eu.west.emit.checkpoints.enabled = true\n"
        "us.east->eu.west.offset.lag.max = 9\n"
    )
    flow = load(tmp_path, text).flows[0]
    assert (flow.source, flow.target, flow.offset_lag_max) == ("us.east", "eu.west", 9)
    err = load_error(tmp_path, text + "ap.south->eu.west.enabled = true\n")
    assert "undefined cluster ap.south" in assert_at(err, f0(tmp_path), 7, "ap.south->eu.west.enabled")


# --- per-flow keys -------------------------------------------------------------------------

TWO_FLOWS = BASE + "B->A.enabled = true\n"


def test_per_flow_override_beats_top_level(tmp_path: Path) -> None:
    s = load(
        tmp_path,
        TWO_FLOWS + "topics = orders.*\nA->B.topics = payments\noffset.lag.max = 7\nB->A.offset.lag.max = 0\n",
    )
    ab, ba = s.flow(FlowId("A", "B")), s.flow(FlowId("B", "A"))
    assert ab.topics_include.fullmatch("payments") and not ab.topics_include.fullmatch("orders1")
    assert ba.topics_include.fullmatch("orders1") and not ba.topics_include.fullmatch("payments")
    assert (ab.offset_lag_max, ba.offset_lag_max) == (7, 0)


def test_per_flow_error_names_the_flow_key(tmp_path: Path) -> None:
    err = load_error(tmp_path, TWO_FLOWS + "offset.lag.max = 7\nB->A.offset.lag.max = -1\n")
    assert "expected an integer >= 0, got '-1'" in assert_at(err, f0(tmp_path), NEXT + 2, "B->A.offset.lag.max")


def test_topic_lists(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE + "topics = orders , ,pay.*,\ntopics.exclude = pay\\\\.secret\n").flows[0]
    assert flow.topics_include.fullmatch("orders") and flow.topics_include.fullmatch("payments")
    assert not flow.topics_include.fullmatch("orders2")  # whole names only
    assert flow.topics_exclude.fullmatch("pay.secret") and not flow.topics_exclude.fullmatch("payXsecret")
    assert flow.should_replicate("payments") and not flow.should_replicate("pay.secret")


def test_empty_topic_lists_match_nothing(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE + "topics = \ntopics.exclude = ,\n").flows[0]
    assert not flow.topics_include.fullmatch("orders") and not flow.topics_include.fullmatch("")
    assert not flow.topics_exclude.fullmatch("__consumer_offsets")
    assert flow.should_replicate("heartbeats")  # heartbeats always, as in MM2


def test_alternation_inside_a_regex_stays_grouped(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE + "topics = a|b.x, c\n").flows[0]
    assert flow.topics_include.fullmatch("b.x") and flow.topics_include.fullmatch("c")


def test_invalid_topic_regex(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "A->B.topics = ok, bad[\n")
    assert "invalid regular expression 'bad['" in assert_at(err, f0(tmp_path), NEXT, "A->B.topics")


def test_legacy_topics_blacklist(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE + "topics.blacklist = secret.*\n").flows[0]
    assert flow.topics_exclude.fullmatch("secret1") and not flow.topics_exclude.fullmatch("__x")
    err = load_error(tmp_path, BASE + "A->B.topics.blacklist = (\n")
    assert_at(err, f0(tmp_path), NEXT, "A->B.topics.blacklist")


def test_topics_exclude_beats_blacklist_at_any_level(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE + "topics.exclude = x.*\nA->B.topics.blacklist = y.*\n").flows[0]
    assert flow.topics_exclude.fullmatch("x1") and not flow.topics_exclude.fullmatch("y1")


def test_mm2_4_defaults_copy_internal_suffixed_topics_and_drop_the_blacklist_aliases(tmp_path: Path, caplog) -> None:
    """MM2 4.0 (the real 4.0.0 to 4.3.1 jars): topics.exclude's default is `mm2.*\\.internal,
    .*\\.replica, __.*`, a topic ending in -internal or .internal is no longer internal, and
    topics.blacklist / groups.blacklist are no longer read. Unset, 3.x's rules hold."""
    three = load(tmp_path, BASE).flows[0]
    assert not three.should_replicate("audit-internal") and not three.should_replicate("audit.internal")
    four = load(tmp_path, BASE + "mirrorlag.mm2.version = 4.3.1\n").flows[0]
    assert four.should_replicate("audit-internal") and four.should_replicate("audit.internal")
    for internal in ("mm2-offset-syncs.B.internal", "mm2-offsets.A.internal", "__consumer_offsets", "x.replica"):
        assert not four.should_replicate(internal), internal
    assert load(tmp_path, BASE + "mirrorlag.mm2.version = 3.9\n").flows[0].topics_exclude.pattern == \
        three.topics_exclude.pattern
    with caplog.at_level("WARNING"):
        legacy = load(tmp_path, BASE + "mirrorlag.mm2.version = 4.0\ntopics.blacklist = secret.*\n").flows[0]
    assert legacy.should_replicate("secret1")
    assert "topics.blacklist at" in caplog.text and "use topics.exclude" in caplog.text
    err = load_error(tmp_path, BASE + "mirrorlag.mm2.version = four\n")
    assert "a Kafka version such as 3.9.2 or 4.3.1" in assert_at(err, f0(tmp_path), NEXT, "mirrorlag.mm2.version")


@pytest.mark.parametrize(
    ("value", "identity"),
    [
        (DEFAULT_POLICY, False),
        ("DefaultReplicationPolicy", False),
        (IDENTITY_POLICY, True),
        (" IdentityReplicationPolicy ", True),
    ],
)
def test_replication_policy_class(tmp_path: Path, value: str, identity: bool) -> None:
    flow = load(tmp_path, BASE + f"replication.policy.class = {value}\n").flows[0]
    assert flow.policy.identity is identity
    assert flow.policy.remote_topic("A", "t") == ("t" if identity else "A.t")


def test_unsupported_replication_policy_class(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "A->B.replication.policy.class = com.acme.MyPolicy\n")
    assert assert_at(err, f0(tmp_path), NEXT, "A->B.replication.policy.class").endswith(
        "unsupported replication.policy.class com.acme.MyPolicy "
        "(mirrorlag knows DefaultReplicationPolicy and IdentityReplicationPolicy)"
    )


def test_policy_separator_and_internal_separator(tmp_path: Path) -> None:
    text = BASE + "replication.policy.separator = _\nreplication.policy.internal.topic.separator.enabled = FALSE\n"
    policy = load(tmp_path, text).flows[0].policy
    assert policy.separator == "_" and not policy.internal_separator_enabled
    assert policy.remote_topic("A", "t") == "A_t"
    assert policy.offset_syncs_topic("A") == "mm2-offset-syncs.A.internal"


def test_empty_separator(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "replication.policy.separator =  \n")
    assert_at(err, f0(tmp_path), NEXT, "replication.policy.separator")


@pytest.mark.parametrize("value", ["yes", "1", "", "truee"])
def test_bad_boolean(tmp_path: Path, value: str) -> None:
    key = "replication.policy.internal.topic.separator.enabled"
    err = load_error(tmp_path, BASE + f"{key} = {value}\n")
    assert assert_at(err, f0(tmp_path), NEXT, key).endswith(f"expected true or false, got {value!r}")


def test_offset_syncs_location(tmp_path: Path) -> None:
    key = "offset-syncs.topic.location"
    assert load(tmp_path, BASE + f"{key} = Target\n").flows[0].offset_syncs_topic_location == "target"
    err = load_error(tmp_path, BASE + f"{key} = middle\n")
    assert "expected one of source, target, got 'middle'" in assert_at(err, f0(tmp_path), NEXT, key)


def test_engine_params(tmp_path: Path) -> None:
    text = BASE + "replication.lag.time.max.ms = 1500\nmetrics.sample.window.ms=+60000\nA->B.metrics.num.samples = 3 \n"
    assert load(tmp_path, text).flows[0].engine == EngineParams(1.5, 60.0, 3)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("replication.lag.time.max.ms", "abc", "expected an integer number of milliseconds, got 'abc'"),
        ("replication.lag.time.max.ms", "0", "expected an integer number of milliseconds > 0, got '0'"),
        ("metrics.sample.window.ms", "1.5", "expected an integer number of milliseconds, got '1.5'"),
        ("metrics.sample.window.ms", "1_000", "expected an integer number of milliseconds, got '1_000'"),
        ("metrics.num.samples", "0", "expected an integer > 0, got '0'"),
        ("metrics.num.samples", "0x10", "expected an integer, got '0x10'"),
        ("offset.lag.max", "", "expected an integer, got ''"),
        ("offset.lag.max", "-5", "expected an integer >= 0, got '-5'"),
    ],
)
def test_bad_numbers(tmp_path: Path, key: str, value: str, expected: str) -> None:
    err = load_error(tmp_path, BASE + f"{key} = {value}\n")
    assert assert_at(err, f0(tmp_path), NEXT, key).endswith(expected)


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["", "+"]), st.sampled_from(["", " ", "\t"]))
@hsettings(max_examples=30, deadline=None)
def test_java_int_syntax(tmp_path_factory: pytest.TempPathFactory, n: int, sign: str, blank: str) -> None:
    path = write(tmp_path_factory.mktemp("ints"), BASE + f"offset.lag.max = {sign}{n}{blank}\n")
    assert load_settings([path]).flows[0].offset_lag_max == n


# --- global keys -----------------------------------------------------------------------------

REFRESH = "replication.record.lag.metric.refresh.interval"
TTL = "replication.record.lag.metric.last.replicated.offset.ttl"


def test_kip971_keys(tmp_path: Path) -> None:
    s = load(tmp_path, BASE + f"{REFRESH} = 5000\n{TTL} = 60000\n")
    assert (s.refresh_interval_s, s.lro_ttl_s) == (5.0, 60.0)
    assert load(tmp_path, BASE + f"{REFRESH} = -1\n").refresh_interval_s is None


@pytest.mark.parametrize("value", ["0", "-2", "-1000"])
def test_refresh_interval_only_minus_one_disables(tmp_path: Path, value: str) -> None:
    err = load_error(tmp_path, BASE + f"{REFRESH} = {value}\n")
    message = assert_at(err, f0(tmp_path), NEXT, REFRESH)
    assert message.endswith(f"expected an integer number of milliseconds > 0, or -1 to disable, got {value!r}")


def test_refresh_interval_not_a_number(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + f"{REFRESH} = soon\n")
    assert assert_at(err, f0(tmp_path), NEXT, REFRESH).endswith("expected an integer number of milliseconds, got 'soon'")


def test_ttl_must_be_positive(tmp_path: Path) -> None:
    assert_at(load_error(tmp_path, BASE + f"{TTL} = 0\n"), f0(tmp_path), NEXT, TTL)


def test_global_keys_are_not_per_flow(tmp_path: Path) -> None:
    assert load(tmp_path, BASE + f"A->B.{REFRESH} = -1\n").refresh_interval_s == 15.0


# --- mirrorlag.* keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        (" localhost:0 ", "localhost", 0),
        ("[::1]:9464", "::1", 9464),
        ("[::]:65535", "::", 65535),
        (":9464", "0.0.0.0", 9464),  # every interface, as Prometheus exporters read it
        (" :0", "0.0.0.0", 0),
    ],
)
def test_http_listener(tmp_path: Path, value: str, host: str, port: int) -> None:
    s = load(tmp_path, BASE + f"mirrorlag.http.listener = {value}\n")
    assert (s.http_host, s.http_port) == (host, port)


@pytest.mark.parametrize("value", ["9464", "host:", ":", ":65536", "host:65536", "::1:9464", "[::1]", "h:p", "h:123456"])
def test_bad_http_listener(tmp_path: Path, value: str) -> None:
    err = load_error(tmp_path, BASE + f"mirrorlag.http.listener = {value}\n")
    assert f"got {value!r}" in assert_at(err, f0(tmp_path), NEXT, "mirrorlag.http.listener")


def test_mirrorlag_keys(tmp_path: Path) -> None:
    text = BASE + (
        "mirrorlag.leo.isolation.level = READ_COMMITTED\n"
        "mirrorlag.leo.chunk.size = 50\n"
        "mirrorlag.request.timeout.ms = 2500\n"
    )
    s = load(tmp_path, text)
    assert (s.leo_isolation, s.leo_chunk_size, s.request_timeout_s) == ("read_committed", 50, 2.5)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mirrorlag.leo.isolation.level", "serializable"),
        ("mirrorlag.leo.chunk.size", "0"),
        ("mirrorlag.request.timeout.ms", "-1"),
        ("mirrorlag.request.timeout.ms", "ten"),
    ],
)
def test_bad_mirrorlag_values(tmp_path: Path, key: str, value: str) -> None:
    err = load_error(tmp_path, BASE + f"{key} = {value}\n")
    assert f"got {value!r}" in assert_at(err, f0(tmp_path), NEXT, key)


def test_unknown_mirrorlag_key_with_suggestion(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "mirrorlag.http.listner = :1\n")
    assert assert_at(err, f0(tmp_path), NEXT, "mirrorlag.http.listner").endswith(
        "unknown key; did you mean mirrorlag.http.listener?"
    )


def test_unknown_mirrorlag_key_without_suggestion(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE, "mirrorlag.zzz = 1\n")
    assert assert_at(err, f1(tmp_path), 1, "mirrorlag.zzz").endswith(": unknown key")


def test_mirrorlag_keys_are_one_table() -> None:
    own = {k for k in (*loader.GLOBAL_KEYS, *loader.FLOW_KEYS) if k.startswith("mirrorlag.")}
    assert not set(loader.GLOBAL_KEYS) & set(loader.FLOW_KEYS)
    assert own == {
        "mirrorlag.http.listener",
        "mirrorlag.http.web.config.file",
        "mirrorlag.leo.isolation.level",
        "mirrorlag.mm2.version",
        "mirrorlag.leo.chunk.size",
        "mirrorlag.request.timeout.ms",
        "mirrorlag.lro.feeds",
        "mirrorlag.freshness.table.points",
        "mirrorlag.retention.headroom.warn.ms",
        "mirrorlag.retention.poll.interval.ms",
        "mirrorlag.metadata.max.age.ms",
        "mirrorlag.metrics.detail",
        "mirrorlag.metrics.partition.series.max",
        "mirrorlag.history.dir",
        "mirrorlag.history.segment.ms",
        "mirrorlag.history.segment.max.rows",
        "mirrorlag.history.buffer.max.rows",
        "mirrorlag.history.retention.ms",
        "mirrorlag.history.upload.uri",
        "mirrorlag.history.upload.max.bytes.per.second",
        "mirrorlag.history.upload.quota.window.num",
        "mirrorlag.history.upload.quota.window.size.seconds",
        "mirrorlag.history.upload.s3.endpoint.url",
        "mirrorlag.history.upload.s3.region",
        "mirrorlag.history.upload.s3.access.key.id",
        "mirrorlag.history.upload.s3.secret.access.key",
        "mirrorlag.history.upload.s3.session.token",
        "mirrorlag.history.upload.s3.path.style.access",
        "mirrorlag.history.writer.id",
        "mirrorlag.history.retention.max.ms",

        "mirrorlag.failover.enabled",
        "mirrorlag.failover.interval.ms",
        "mirrorlag.failover.reread.max.records",
        "mirrorlag.failover.checkpoint.max.age.ms",
        "mirrorlag.failover.groups.max.in.flight",
        "mirrorlag.failover.partition.series.max",
    }


# --- cluster client configs (client.py) ------------------------------------------------------------


def test_client_layering_top_level_alias_admin(tmp_path: Path) -> None:
    extra = (
        "client.id = top\nrequest.timeout.ms = 1000\nsecurity.protocol = SSL\nssl.truststore.type = PEM\n"
        "ssl.truststore.location = /top/ca.pem\n"
        "B.client.id = b\nB.admin.client.id = b-admin\nB.producer.request.timeout.ms = 1\n"
        "B.consumer.security.protocol = SASL_SSL\nB.ssl.truststore.location = /b/ca.pem\n"
        "A.admin.request.timeout.ms = 2000\nA.security.protocol = PLAINTEXT\n"
    )
    s = load(tmp_path, BASE + extra)
    assert s.clusters["B"].client == {
        "bootstrap.servers": "b:9092",
        "client.id": "b-admin",
        "request.timeout.ms": "1000",
        "security.protocol": "SSL",
        "ssl.ca.location": "/b/ca.pem",
    }
    assert s.clusters["A"].client == {
        "bootstrap.servers": "a:9092",
        "client.id": "top",
        "request.timeout.ms": "2000",
        "security.protocol": "PLAINTEXT",
    }


def test_admin_may_override_bootstrap(tmp_path: Path) -> None:
    cluster = load(tmp_path, BASE + "B.admin.bootstrap.servers = b-admin:9093\n").clusters["B"]
    assert cluster.bootstrap_servers == cluster.client["bootstrap.servers"] == "b-admin:9093"


def test_bootstrap_servers_normalised(tmp_path: Path) -> None:
    assert client(tmp_path, "B.bootstrap.servers =  b1:9092 , b2:9092,\n")["bootstrap.servers"] == "b1:9092,b2:9092"


def test_unknown_client_keys_ignored(tmp_path: Path) -> None:
    assert client(tmp_path, "B.linger.ms = 5\nB.ssl.truststore.location = /x\n") == {"bootstrap.servers": "b:9092"}


@pytest.mark.parametrize("value", ["ssl", "Sasl_Plaintext", "SASL_SSL", "plaintext"])
def test_security_protocol_case_insensitive(tmp_path: Path, value: str) -> None:
    extra = f"B.security.protocol = {value}\nB.sasl.mechanism = PLAIN\n"
    extra += f"B.sasl.jaas.config = {PLAIN_JAAS}\n"
    assert client(tmp_path, extra)["security.protocol"] == value.upper()


def test_bad_security_protocol(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "B.security.protocol = TLS\n")
    assert "got 'TLS'" in assert_at(err, f0(tmp_path), NEXT, "B.security.protocol")


def test_bad_request_timeout(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "request.timeout.ms = 0\n")
    assert "got '0'" in assert_at(err, f0(tmp_path), NEXT, "request.timeout.ms")


PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="pw";'
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_sasl_plain(tmp_path: Path) -> None:
    extra = f"B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\nB.sasl.jaas.config = {PLAIN_JAAS}\n"
    assert client(tmp_path, extra) == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "pw",
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "scram-sha-512"])
def test_sasl_scram_with_escapes_and_bare_words(tmp_path: Path, mechanism: str) -> None:
    # In a .properties file `\\` is one backslash, so `\\\"` reaches JAAS as `\"`.
    jaas = f'{SCRAM_JAAS} required \\\n   username=bob password="p\\\\\\"w\\\\\\\\d" tokenauth=false ;'
    extra = f"B.security.protocol = SASL_PLAINTEXT\nsasl.mechanism = {mechanism}\nB.sasl.jaas.config = {jaas}\n"
    cfg = client(tmp_path, extra)
    assert cfg["sasl.mechanisms"] == mechanism.upper()
    assert (cfg["sasl.username"], cfg["sasl.password"]) == ("bob", 'p"w\\d')


def test_sasl_keys_ignored_without_sasl_protocol(tmp_path: Path) -> None:
    assert client(tmp_path, "sasl.mechanism = GSSAPI\nsasl.jaas.config = junk\n") == {"bootstrap.servers": "b:9092"}


def test_sasl_defaults_to_gssapi(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + f"B.security.protocol = SASL_SSL\nB.sasl.jaas.config = {PLAIN_JAAS}\n")
    message = assert_at(err, f0(tmp_path), NEXT, "B.security.protocol")
    assert "GSSAPI is not supported yet" in message and "defaults to GSSAPI" in message


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER"])
def test_unsupported_sasl_mechanisms(tmp_path: Path, mechanism: str) -> None:
    err = load_error(tmp_path, BASE + f"security.protocol = SASL_SSL\n\nsasl.mechanism = {mechanism}\n")
    assert f"{mechanism} is not supported yet" in assert_at(err, f0(tmp_path), NEXT + 2, "sasl.mechanism")


def test_unknown_sasl_mechanism(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "B.security.protocol = SASL_SSL\nB.sasl.mechanism = MD5\n")
    assert "got 'MD5'" in assert_at(err, f0(tmp_path), NEXT + 1, "B.sasl.mechanism")


def test_sasl_needs_jaas(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\n")
    assert "needs sasl.jaas.config" in assert_at(err, f0(tmp_path), NEXT + 1, "B.sasl.mechanism")


def test_unsupported_login_module(tmp_path: Path) -> None:
    jaas = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="p";'
    extra = f"B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\nB.sasl.jaas.config = {jaas}\n"
    err = load_error(tmp_path, BASE + extra)
    message = assert_at(err, f0(tmp_path), NEXT + 2, "B.sasl.jaas.config")
    assert "login module com.sun.security.auth.module.Krb5LoginModule is not supported" in message


# --- secrets never appear in errors -------------------------------------------------------------

SECRET = "hunter2-s3cret"


@pytest.mark.parametrize(
    "jaas",
    [
        f'{SCRAM_JAAS} required username="u" password="{SECRET};',  # unterminated quote
        f'{SCRAM_JAAS} required username="u" password="{SECRET}"',  # no ';'
        f'{SCRAM_JAAS} required username="u" password="{SECRET}"; {SCRAM_JAAS} required;',  # two entries
        f'{SCRAM_JAAS} required password="{SECRET}";',  # no username
        f'{SCRAM_JAAS} required username="{SECRET}";',  # no password
        f'{SCRAM_JAAS} username="u" password="{SECRET}";',  # no flag
        SECRET,
    ],
)
def test_bad_jaas_never_echoes_it(tmp_path: Path, jaas: str) -> None:
    extra = f"B.security.protocol = SASL_SSL\nB.sasl.mechanism = SCRAM-SHA-256\nB.sasl.jaas.config = {jaas}\n"
    err = load_error(tmp_path, BASE + extra)
    message = assert_at(err, f0(tmp_path), NEXT + 2, "B.sasl.jaas.config")
    assert SECRET not in message and SECRET not in repr(err)
    assert "invalid value" in message


def test_bad_inline_key_never_echoes_it(tmp_path: Path) -> None:
    extra = f"B.security.protocol = SSL\nB.ssl.keystore.type = PEM\nB.ssl.keystore.key = {SECRET}\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 2, "B.ssl.keystore.key")
    assert SECRET not in message and "invalid value" in message


def test_bad_base64_in_inline_key_never_echoes_it(tmp_path: Path) -> None:
    pem = f"-----BEGIN PRIVATE KEY-----{SECRET}!-----END PRIVATE KEY-----"
    extra = f"B.security.protocol = SSL\nB.ssl.keystore.type = PEM\nB.ssl.keystore.key = {pem}\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 2, "B.ssl.keystore.key")
    assert SECRET not in message


def test_keystore_paths_match_the_secret_pattern_and_are_not_echoed(tmp_path: Path) -> None:
    extra = f"B.security.protocol = SSL\nB.ssl.keystore.location = /{SECRET}/ks.jks\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 1, "B.ssl.keystore.location")
    assert SECRET not in message and "keytool -importkeystore" in message


def test_unknown_keystore_type_not_echoed(tmp_path: Path) -> None:
    extra = f"B.security.protocol = SSL\nB.ssl.keystore.location = /ks\nB.ssl.keystore.type = {SECRET}\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 1, "B.ssl.keystore.location")
    assert SECRET not in message and SECRET.upper() not in message


def test_generic_value_errors_hide_secret_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Any table key matching settings.is_secret_key gets "invalid value" without the value.
    monkeypatch.setitem(loader.GLOBAL_KEYS, "mirrorlag.api.token", (loader._integer(1), "1"))
    err = load_error(tmp_path, BASE + f"mirrorlag.api.token = {SECRET}\n")
    message = assert_at(err, f0(tmp_path), NEXT, "mirrorlag.api.token")
    assert SECRET not in message and message.endswith("invalid value (expected an integer)")


def test_invalid_escape_in_secret_not_echoed(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + f"B.sasl.jaas.config = {SECRET}\\u12\n")
    assert SECRET not in str(err) and err.line == NEXT


def test_cluster_repr_hides_secrets(tmp_path: Path) -> None:
    jaas = PLAIN_JAAS.replace("pw", SECRET)
    extra = f"B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\nB.sasl.jaas.config = {jaas}\n"
    s = load(tmp_path, BASE + extra)
    assert s.clusters["B"].client["sasl.password"] == SECRET
    assert SECRET not in repr(s.clusters["B"]) and SECRET not in repr(s)


# --- SSL ------------------------------------------------------------------------------------------


def test_pem_stores(tmp_path: Path) -> None:
    extra = (
        "security.protocol = SSL\nssl.truststore.type = pem\nssl.truststore.location = /etc/ca.pem\n"
        "B.ssl.keystore.type = PEM\nB.ssl.keystore.location = /etc/b.pem\nB.ssl.key.password = kp\n"
        "B.ssl.endpoint.identification.algorithm = \n"
    )
    assert client(tmp_path, extra) == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/b.pem",
        "ssl.key.location": "/etc/b.pem",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_inline_pem_reflowed_for_openssl(tmp_path: Path) -> None:
    one_line = f"-----BEGIN CERTIFICATE----- {PEM_BODY} -----END CERTIFICATE-----"
    extra = (
        "B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\n"
        f"B.sasl.jaas.config = {PLAIN_JAAS}\n"
        "B.ssl.truststore.type = PEM\n"
        f"B.ssl.truststore.certificates = {one_line} \\\n {one_line}\n"
        "B.ssl.keystore.type = PEM\n"
        f"B.ssl.keystore.certificate.chain = {one_line}\n"
        "B.ssl.keystore.key = -----BEGIN ENCRYPTED PRIVATE KEY-----\\n"  # `\n` escapes: real newlines
        f"{PEM_BODY[:70]}\\n{PEM_BODY[70:]}\\n-----END ENCRYPTED PRIVATE KEY-----\n"
        "B.ssl.endpoint.identification.algorithm = HTTPS\n"
    )
    cfg = client(tmp_path, extra)
    cert = f"-----BEGIN CERTIFICATE-----\n{PEM_BODY[:64]}\n{PEM_BODY[64:]}\n-----END CERTIFICATE-----\n"
    assert cfg["ssl.ca.pem"] == cert + cert
    assert cfg["ssl.certificate.pem"] == cert
    assert cfg["ssl.key.pem"] == cert.replace("CERTIFICATE", "ENCRYPTED PRIVATE KEY")
    assert cfg["ssl.endpoint.identification.algorithm"] == "https"
    assert cfg["sasl.mechanisms"] == "PLAIN"


def test_ssl_keys_ignored_without_ssl_protocol(tmp_path: Path) -> None:
    extra = "ssl.truststore.location = /x.jks\nB.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism=PLAIN\n"
    extra += f"B.sasl.jaas.config = {PLAIN_JAAS}\n"
    assert "ssl.ca.location" not in client(tmp_path, extra)


def test_jks_truststore_by_default(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "B.security.protocol = SSL\nB.ssl.truststore.location = /etc/trust.jks\n")
    message = assert_at(err, f0(tmp_path), NEXT + 1, "B.ssl.truststore.location")
    assert "JKS stores cannot be read by librdkafka; convert with " in message
    assert "`keytool -exportcert -rfc -keystore /etc/trust.jks -alias <ca-alias> -file /etc/trust.jks.pem`" in message
    assert "ssl.truststore.type=PEM" in message


def test_pkcs12_truststore(tmp_path: Path) -> None:
    extra = "B.security.protocol = SSL\nB.ssl.truststore.type = PKCS12\nB.ssl.truststore.location = /etc/t.p12\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 2, "B.ssl.truststore.location")
    assert "PKCS12 stores cannot be read by librdkafka" in message
    assert "`openssl pkcs12 -in /etc/t.p12 -nokeys -out /etc/t.p12.pem`" in message


def test_pkcs12_keystore(tmp_path: Path) -> None:
    extra = "security.protocol = SSL\nB.ssl.keystore.type = pkcs12\nB.ssl.keystore.location = /etc/k.p12\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 2, "B.ssl.keystore.location")
    assert "`openssl pkcs12 -in keystore.p12 -nodes -out keystore.pem`" in message
    assert "ssl.keystore.type=PEM" in message


def test_unknown_truststore_type(tmp_path: Path) -> None:
    extra = "B.security.protocol = SSL\nB.ssl.truststore.type = BKS\nB.ssl.truststore.location = /t\n"
    message = assert_at(load_error(tmp_path, BASE + extra), f0(tmp_path), NEXT + 2, "B.ssl.truststore.location")
    assert "BKS store type is not supported" in message


def test_inline_pem_needs_pem_type(tmp_path: Path) -> None:
    pem = f"-----BEGIN CERTIFICATE-----{PEM_BODY}-----END CERTIFICATE-----"
    extra = f"B.security.protocol = SSL\nB.ssl.truststore.certificates = {pem}\n"
    err = load_error(tmp_path, BASE + extra)
    message = assert_at(err, f0(tmp_path), NEXT + 1, "B.ssl.truststore.certificates")
    assert "inline PEM needs ssl.truststore.type=PEM, not JKS" in message


def test_bad_endpoint_identification(tmp_path: Path) -> None:
    extra = "B.security.protocol = SSL\nB.ssl.endpoint.identification.algorithm = ldap\n"
    err = load_error(tmp_path, BASE + extra)
    assert "got 'ldap'" in assert_at(err, f0(tmp_path), NEXT + 1, "B.ssl.endpoint.identification.algorithm")


def test_suggestion_ignores_the_shared_prefix(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "mirrorlag.leo.chunksize = 5\n")
    assert str(err).endswith("unknown key; did you mean mirrorlag.leo.chunk.size?")
    err = load_error(tmp_path, BASE + "mirrorlag.bogus = 5\n")
    assert str(err).endswith(": unknown key")


# --- feeds and the Connect offsets topic ---------------------------------------------------

FEEDS_BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def test_lro_feeds_default_and_choice(tmp_path):
    from mirrorlag.config import load_settings

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE)
    assert load_settings([config]).lro_feeds == ("offset-syncs", "connect-offsets", "target-progress")
    config.write_text(FEEDS_BASE + "mirrorlag.lro.feeds = connect-offsets\n")
    assert load_settings([config]).lro_feeds == ("connect-offsets",)


def test_target_progress_needs_the_offset_syncs_it_translates_through(tmp_path):
    from mirrorlag.config import load_settings
    from mirrorlag.errors import ConfigError

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE + "mirrorlag.lro.feeds = connect-offsets, target-progress\n")
    with pytest.raises(ConfigError) as err:
        load_settings([config])
    assert f"{config}:5: mirrorlag.lro.feeds" in str(err.value)
    assert "list offset-syncs too" in str(err.value)


def test_exactly_once_is_read_as_mm2_worker_reads_it(tmp_path):
    """MirrorMakerConfig.workerConfig takes the target's `B.` keys; a top-level
    exactly.once.source.support never reaches the worker."""
    from mirrorlag.config import load_settings
    from mirrorlag.errors import ConfigError

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE + "exactly.once.source.support = enabled\n")
    assert not load_settings([config]).flows[0].target_transactional
    for value, transactional in (("enabled", True), ("Enabled ", True), ("preparing", False), ("disabled", False)):
        config.write_text(FEEDS_BASE + f"B.exactly.once.source.support = {value}\n")
        assert load_settings([config]).flows[0].target_transactional is transactional, value
    config.write_text(FEEDS_BASE + "B.exactly.once.source.support = yes\n")
    with pytest.raises(ConfigError) as err:
        load_settings([config])
    assert f"{config}:5:" in str(err.value) and "enabled, preparing or disabled" in str(err.value)


def test_unknown_lro_feed_names_file_line_key_and_suggests(tmp_path):
    from mirrorlag.config import load_settings
    from mirrorlag.errors import ConfigError

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE + "mirrorlag.lro.feeds = offset-sync\n")
    with pytest.raises(ConfigError) as err:
        load_settings([config])
    assert f"{config}:5: mirrorlag.lro.feeds" in str(err.value)
    assert "did you mean offset-syncs" in str(err.value)


def test_connect_offsets_topic_follows_mm2_worker_config(tmp_path):
    from mirrorlag.config import load_settings

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE)
    assert load_settings([config]).flows[0].connect_offsets_topic == "mm2-offsets.A.internal"
    config.write_text(FEEDS_BASE + "B.offset.storage.topic = b-offsets\n")
    assert load_settings([config]).flows[0].connect_offsets_topic == "b-offsets"
    config.write_text(FEEDS_BASE + "B.offset.storage.topic = b-offsets\noffset.storage.topic = all-offsets\n")
    assert load_settings([config]).flows[0].connect_offsets_topic == "all-offsets"


def test_issue4_keys_reach_every_flow(tmp_path):
    from mirrorlag.config import load_settings

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE + "mirrorlag.freshness.table.points = 120\n"
                      "mirrorlag.retention.headroom.warn.ms = 600000\nmirrorlag.retention.poll.interval.ms = 5000\n")
    settings = load_settings([config])
    assert (settings.flows[0].engine.freshness_points, settings.flows[0].engine.retention_warn_s) == (120, 600.0)
    assert settings.retention_poll_interval_s == 5.0


def test_metadata_max_age(tmp_path):
    from mirrorlag.config import load_settings

    config = tmp_path / "f.properties"
    config.write_text(FEEDS_BASE)
    assert load_settings([config]).metadata_max_age_s == 60.0  # a minute, with triggers (poller)
    config.write_text(FEEDS_BASE + "mirrorlag.metadata.max.age.ms = 0\n")
    assert load_settings([config]).metadata_max_age_s == 0.0  # every poll
    config.write_text(FEEDS_BASE + "mirrorlag.metadata.max.age.ms = 60000\n")
    assert load_settings([config]).metadata_max_age_s == 60.0
    config.write_text(FEEDS_BASE + "mirrorlag.metadata.max.age.ms = -1\n")
    with pytest.raises(ConfigError) as info:
        load_settings([config])
    assert f"{config}:" in str(info.value) and "mirrorlag.metadata.max.age.ms" in str(info.value)


# --- per-flow (A->B.) KIP-971 and engine keys: honoured, or warned about --------------------------

THREE = """\
clusters = A, B, C
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
C.bootstrap.servers = c:9092
A->B.enabled = true
A->C.enabled = true
"""


def test_engine_keys_are_honoured_per_flow(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = load(tmp_path, THREE + (
        "replication.lag.time.max.ms = 45000\n"
        "A->B.replication.lag.time.max.ms = 90000\n"
        "A->B.metrics.sample.window.ms = 10000\n"
        "A->B.metrics.num.samples = 4\n"
        "mirrorlag.freshness.table.points = 30\n"
        "A->C.mirrorlag.freshness.table.points = 200\n"
        "A->C.mirrorlag.retention.headroom.warn.ms = 60000\n"
    ))
    ab, ac = settings.flow(FlowId("A", "B")).engine, settings.flow(FlowId("A", "C")).engine
    assert ab == EngineParams(lag_time_max_s=90.0, sample_window_s=10.0, num_samples=4, freshness_points=30)
    assert ac == EngineParams(lag_time_max_s=45.0, freshness_points=200, retention_warn_s=60.0)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_bad_per_flow_engine_value_points_at_it(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "A->B.mirrorlag.freshness.table.points = 1\n")
    assert assert_at(err, f0(tmp_path), NEXT, "A->B.mirrorlag.freshness.table.points").endswith("expected an integer >= 2, got '1'")


def test_unknown_per_flow_mirrorlag_key_is_an_error(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "A->B.mirrorlag.freshness.table.pionts = 3\n")
    assert assert_at(err, f0(tmp_path), NEXT, "A->B.mirrorlag.freshness.table.pionts").endswith(
        "unknown key; did you mean mirrorlag.freshness.table.points?")


def test_global_only_keys_given_per_flow_are_warned_once_with_the_value_used(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="mirrorlag.config.loader")
    settings = load(tmp_path, THREE + (
        "replication.record.lag.metric.refresh.interval = 5000\n"
        "A->B.replication.record.lag.metric.refresh.interval = 1000\n"
        "A->C.replication.record.lag.metric.last.replicated.offset.ttl = 99000\n"
        "A->B.mirrorlag.leo.chunk.size = 10\n"
    ))
    assert (settings.refresh_interval_s, settings.lro_ttl_s, settings.leo_chunk_size) == (5.0, 20.0, 250)
    file = f0(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"{file}:8: A->B.replication.record.lag.metric.refresh.interval is ignored: "
        "replication.record.lag.metric.refresh.interval cannot take a per-flow value (one poll schedule "
        f"reads every flow); using replication.record.lag.metric.refresh.interval = 5000 from {file}:7",
        f"{file}:10: A->B.mirrorlag.leo.chunk.size is ignored: mirrorlag.leo.chunk.size cannot take a "
        "per-flow value (it is read once for the whole sidecar); using mirrorlag.leo.chunk.size = 250 (the default)",
        f"{file}:9: A->C.replication.record.lag.metric.last.replicated.offset.ttl is ignored: "
        "replication.record.lag.metric.last.replicated.offset.ttl cannot take a per-flow value (one LRO "
        "cache holds every flow's offsets); using replication.record.lag.metric.last.replicated.offset.ttl "
        "= 20000 (the default)",
    ]


def test_a_disabled_flows_keys_are_not_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="mirrorlag.config.loader")
    load(tmp_path, BASE + "B->A.replication.record.lag.metric.refresh.interval = 1000\n")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_mm2_checkpoints_by_the_topics_filter_alone(tmp_path: Path) -> None:
    # MirrorCheckpointTask.shouldCheckpointTopic: heartbeats are copied whatever the filter says, but
    # checkpointed only where it names them; never what MM2 does not copy (a cycle).
    flow = load(tmp_path, BASE + "A->B.topics = orders.*\n").flow(FlowId("A", "B"))
    assert flow.should_replicate("heartbeats") and not flow.should_checkpoint("heartbeats")
    assert flow.should_replicate("C.heartbeats") and not flow.should_checkpoint("C.heartbeats")
    assert flow.should_checkpoint("orders") and not flow.should_checkpoint("B.orders")
    named = load(tmp_path, BASE + "A->B.topics = orders.*, heartbeats\n").flow(FlowId("A", "B"))
    assert named.should_checkpoint("heartbeats")
