"""Every metric the Grafana dashboard and the Prometheus rules name is one a real sidecar exports.

A module fixture runs what production runs, on two real (tansu) brokers: a mirror (`mirrorlag
mirror`, which writes MM2's offset syncs, Connect offsets and heartbeats) copies a topic, then
stalls while the source gets more records, and `mirrorlag run` with history and upload on serves
/metrics. Its exposition is the truth: a query may name a metric with samples there, or a family
the sidecar declares (# TYPE) but has no sample of in this situation (retention headroom, records
lost, byte lag: they appear only when there is something to report), or a recording rule of
deploy/prometheus, or Prometheus's own `up`. promtool parses every dashboard query, and a real
Prometheus scraping the sidecar with the rules loaded answers every one of them with data (unless it
names only such a family) while none of the alerts is active."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirrorlag.embedded import free_port
from mirrorlag.exporters.prometheus import FAMILIES
from tests.conftest import Clusters
from tests.deploy.common import DASHBOARD, RULES, metric_names, promtool_check_exprs, yaml_docs
from tests.helpers import eventually, running_sidecar
from tests.tools import require_tool

pytestmark = pytest.mark.integration

PROMETHEUS_OWN = {"up"}
# Families a sidecar declares but fills only when there is something to report (docs/metrics.md
# "Metric families"); none of these situations can be made on tansu (no DeleteRecords, no callback feed).
CONDITIONAL = {
    "mirrorlag_retention_headroom_seconds", "mirrorlag_partition_records_lost", "mirrorlag_records_lost_total",
    "mirrorlag_replication_byte_lag_estimate_bytes", "mirrorlag_poll_errors_total", "mirrorlag_metadata_errors_total",
    "mirrorlag_lro_rewinds_total", "mirrorlag_records_lost_unverified_total", "mirrorlag_probe_outcomes_total",
    "mirrorlag_catch_up_estimate_seconds", "mirrorlag_replication_freshness_lag_lower_bound",
    "mirrorlag_replication_time_lag_lower_bound",
    # Failover readiness: a series per consumer group, and none before a group commits on a mirrored topic.
    "mirrorlag_group_ready", "mirrorlag_group_failover_reread_records", "mirrorlag_group_checkpoint_age_seconds",
    "mirrorlag_group_partitions", "mirrorlag_group_active_on_target", "mirrorlag_group_partition_state",
    "mirrorlag_group_partition_reread_records",
}
GRAFANA_VARIABLES = {"$source": ".*", "$target": ".*", "$__rate_interval": "1m", "${datasource}": "prometheus"}


@dataclass
class Exposition:
    samples: dict[str, set[str]]  # sample name -> label names seen
    declared: set[str]            # names of every # TYPE line, with histogram sample suffixes
    port: int = 0                 # the live sidecar's, while the module runs

    @property
    def exported(self) -> set[str]:
        return set(self.samples) | self.declared


def parse(body: str) -> Exposition:
    samples: dict[str, set[str]] = defaultdict(set)
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples[sample.name] |= set(sample.labels)
    declared = set()
    for name, kind in re.findall(r"(?m)^# TYPE (\S+) (\S+)$", body):
        if kind == "histogram":  # no sample has the bare name
            declared |= {f"{name}_bucket", f"{name}_gsum", f"{name}_gcount"}
        else:
            declared.add(name)
    return Exposition(dict(samples), declared)


@pytest.fixture(scope="module")
def exposition(tmp_path_factory, own_clusters: Clusters) -> Iterator[Exposition]:
    tmp = tmp_path_factory.mktemp("live")
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    own_clusters.create_topic(topic, 2)
    own_clusters.produce(topic, {0: 20, 1: 20})
    mm2 = tmp / "mm2.properties"
    mm2.write_text(f"clusters = src, dst\nsrc.bootstrap.servers = {own_clusters.source}\n"
                   f"dst.bootstrap.servers = {own_clusters.target}\nsrc->dst.enabled = true\n"
                   f"src->dst.topics = {topic}\ndst.offset.flush.interval.ms = 500\n"
                   "replication.lag.time.max.ms = 1000\n")  # the stalled partitions leave IN_SYNC at once
    port = free_port()
    sidecar = tmp / "mirrorlag.properties"
    sidecar.write_text(f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
                       "replication.record.lag.metric.refresh.interval = 300\n"
                       f"mirrorlag.history.dir = {tmp / 'history'}\nmirrorlag.history.segment.ms = 1000\n"
                       f"mirrorlag.history.upload.uri = file://{tmp / 'uploaded'}\n")
    with open(tmp / "mirror.log", "ab") as log:
        mirror = subprocess.Popen([sys.executable, "-m", "mirrorlag", "mirror", "--config", str(mm2)],
                                  stdout=log, stderr=log)
    try:
        with running_sidecar(mm2, sidecar, port=port, log=tmp / "sidecar.log"):
            def copied() -> None:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                lag = parse_samples(port, "mirrorlag_replication_record_lag", topic, body)
                assert len(lag) == 2 and set(lag.values()) == {0}
                # A replicated heartbeat seen before the stall: once stalled, none arrive (a
                # slow machine's mirror may not have copied its heartbeats topic yet).
                assert "mirrorlag_flow_heartbeat_age_seconds{" in body
            eventually(copied, timeout=30)
            mirror.send_signal(signal.SIGUSR1)  # the mirror stalls; the source keeps growing
            own_clusters.produce(topic, {0: 7, 1: 3})

            def lagging() -> str:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                lag = parse_samples(port, "mirrorlag_replication_record_lag", topic, body)
                assert sorted(lag.values()) == [3, 7]
                # Out of IN_SYNC: the default exposition (detail auto) gives them every family.
                assert len(parse_samples(port, "mirrorlag_replication_time_lag_seconds", topic, body)) == 2
                assert "mirrorlag_flow_heartbeat_age_seconds{" in body
                assert re.search(r"(?m)^mirrorlag_history_segments_written_total [1-9]", body)
                return body
            live = parse(eventually(lagging, timeout=30))
            live.port = port
            yield live
    finally:
        mirror.send_signal(signal.SIGTERM)
        mirror.wait(timeout=15)


def parse_samples(port: int, name: str, topic: str, body: str | None = None) -> dict[tuple, float]:
    body = body or urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(body)
            for s in f.samples if s.name == name and s.labels.get("topic") == topic}


def recorded() -> set[str]:
    return {r["record"] for g in yaml_docs(RULES)[0]["groups"] for r in g["rules"] if "record" in r}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panel_targets() -> list[tuple[str, dict]]:
    return [(panel["title"], target) for panel in dashboard()["panels"] if panel["type"] != "row"
            for target in panel["targets"]]


def variable_queries() -> dict[str, str]:
    """Template variable name -> the metric selector of its label_values(selector, label) query."""
    out = {}
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["query"]["query"])
            assert match, variable
            out[variable["name"]] = match[1]
    return out


def check_names(where: str, names: set[str], exposition: Exposition) -> None:
    for name in names:
        if ":" in name:
            assert name in recorded(), f"{where}: {name} is no recording rule of {RULES.name}"
        else:
            assert name in exposition.exported | PROMETHEUS_OWN, f"{where}: the sidecar does not export {name}"


def test_the_live_sidecar_exports_what_the_readme_lists(exposition):
    declared_only = exposition.declared - set(exposition.samples)
    assert declared_only <= CONDITIONAL
    for family in FAMILIES:  # the per-partition families of mirrorlag/exporters/prometheus.py
        assert family.name in exposition.declared
    for live in ("mirrorlag_replication_record_lag", "mirrorlag_replication_time_lag_seconds",
                 "mirrorlag_flow_heartbeat_age_seconds", "mirrorlag_last_successful_poll_timestamp_seconds",
                 "mirrorlag_flow_time_lag_seconds_partitions_bucket", "mirrorlag_history_pending_upload_bytes",
                 "mirrorlag_flow_partitions", "mirrorlag_partition_state", "mirrorlag_topic_info",
                 "mirrorlag_flow_partitions_by_lro_feed", "mirrorlag_mirror_duplicate_records_total"):
        assert live in exposition.samples, live
    # No per-partition series names the feed that won (it flips between polls).
    assert not [f.name for f in FAMILIES if "feed" in exposition.samples.get(f.name, set())]
    assert exposition.samples["mirrorlag_topic_info"] == {"source", "target", "topic", "remote_topic"}


def test_every_dashboard_query_names_an_exported_metric(exposition):
    targets = panel_targets()
    assert len(targets) >= 20
    for title, target in targets:
        names = metric_names(target["expr"])
        assert names, f"{title}: no metric in {target['expr']}"
        check_names(f"panel {title!r}", names, exposition)
        # labels the legend shows exist on what the query selects (Prometheus adds job, instance)
        labels = {"job", "instance", "le"} | {label for name in names if ":" not in name
                                               for label in exposition.samples.get(name, set())}
        if any(":" in n for n in names):
            labels |= {"source", "target"}
        if all(n in exposition.samples or ":" in n for n in names - PROMETHEUS_OWN):
            for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
                assert label in labels, f"panel {title!r}: legend label {label} is not on {names}"
    for name, selector in variable_queries().items():
        check_names(f"variable ${name}", metric_names(selector), exposition)


def test_every_rule_names_an_exported_metric(exposition):
    for group in yaml_docs(RULES)[0]["groups"]:
        for rule in group["rules"]:
            check_names(rule.get("alert") or rule["record"], metric_names(rule["expr"]), exposition)


def test_prometheus_parses_every_dashboard_query(tmp_path):
    promtool = require_tool("promtool", "prometheus")
    exprs = {}
    for i, (title, target) in enumerate(panel_targets()):
        expr = target["expr"]
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{title}: unknown variable in {expr}"
        exprs[f"{title} #{i}"] = expr
    exprs.update({f"${n}": s.replace("$source", ".*") for n, s in variable_queries().items()})
    promtool_check_exprs(promtool, tmp_path, exprs)


def test_dashboard_structure():
    dash = dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    rows = [p["title"] for p in dash["panels"] if p["type"] == "row"]
    for section in ("Flows overview", "Worst partitions", "Retention headroom", "Sidecar health"):
        assert section in rows
    assert any("records, time, bytes" in r for r in rows)
    for panel in dash["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]
            assert {t["refId"] for t in panel["targets"]} == {chr(65 + i) for i in range(len(panel["targets"]))}


def test_a_misspelt_or_unrecorded_name_is_caught(exposition):
    for expr in ("sum(mirrorlag_replication_record_lags)", "source_target:mirrorlag_nothing:sum",
                 "mirrorlag_flow_time_lag_seconds_partitions"):  # a histogram's bare name has no samples
        with pytest.raises(AssertionError):
            check_names("test", metric_names(expr), exposition)


def _api(port: int, path: str, **params: str) -> dict:
    query = urllib.parse.urlencode(params)
    body = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}?{query}", timeout=10).read())
    assert body["status"] == "success", body
    return body["data"]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, exposition) -> Iterator[int]:
    """A real Prometheus (Debian's package) scraping the live sidecar every second with the rules."""
    binary = require_tool("prometheus", "prometheus")
    tmp_path = tmp_path_factory.mktemp("prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "mirrorlag", "static_configs": [{"targets": [f"127.0.0.1:{exposition.port}"]}]}],
    }))
    port = free_port()
    with open(tmp_path / "prometheus.log", "ab") as log:
        proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
    try:
        def scraped() -> None:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                result = _api(port, "query", query='up{job="mirrorlag"} == 1')["result"]
                recorded_now = _api(port, "query", query="source_target:mirrorlag_replication_record_lag:sum")["result"]
                rated = _api(port, "query", query="rate(mirrorlag_polls_total[1m])")["result"]  # >= 2 scrapes
            except (urllib.error.URLError, ConnectionError) as error:
                raise AssertionError(error) from None
            assert result and recorded_now and rated
        eventually(scraped, timeout=30)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_dashboard_queries_return_data_through_a_real_prometheus(prometheus, exposition):
    """Every panel query, run by Prometheus on the live sidecar's series and the recording rules,
    returns series, unless it names only a metric the sidecar has nothing to report in yet (CONDITIONAL)."""
    empty = []
    for title, target in panel_targets():
        expr = target["expr"]
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        if not _api(prometheus, "query", query=expr)["result"]:
            empty.append((title, expr))
    rules = {r["record"]: metric_names(r["expr"]) for g in yaml_docs(RULES)[0]["groups"] for r in g["rules"] if "record" in r}
    not_yet = exposition.declared - set(exposition.samples)
    allowed = [(t, e) for t, e in empty
               if set().union(*(rules.get(n, {n}) for n in metric_names(e))) & not_yet]
    assert empty == allowed, f"no data for: {[t for t in empty if t not in allowed]}"
    assert len(empty) < len(panel_targets()) // 3
    for name, selector in variable_queries().items():
        assert _api(prometheus, "series", **{"match[]": selector.replace("$source", ".*")}), name


def test_a_healthy_sidecar_raises_no_alert_of_its_own(prometheus):
    """The sidecar polls fine, so its own alerts (down, not polling, history) stay inactive; the
    stalled mirror is too recent for the lag alerts' thresholds."""
    rules = _api(prometheus, "rules", type="alert")["groups"]
    states = {r["name"]: r["state"] for g in rules for r in g["rules"]}
    assert len(states) == 12 and set(states.values()) == {"inactive"}, states


DOCS = Path(__file__).resolve().parents[2] / "docs"
PROMQL_PAGES = (DOCS / "metrics.md", DOCS / "failover-readiness.md")  # metrics.md's join first


def readme_promql() -> list[str]:
    """The PromQL expressions of the ```promql blocks of docs/metrics.md, then
    docs/failover-readiness.md (comment lines start one)."""
    text = "\n".join(page.read_text() for page in PROMQL_PAGES)
    exprs = []
    for block in re.findall(r"```promql\n(.*?)```", text, flags=re.S):
        for part in re.split(r"^#.*\n", block, flags=re.M):
            if part.strip():
                exprs.append(part.strip())
    return exprs


def test_readme_promql_parses(tmp_path):
    exprs = readme_promql()
    assert len(exprs) >= 4, "docs/metrics.md and docs/failover-readiness.md have ```promql blocks"
    promtool_check_exprs(require_tool("promtool", "prometheus"), tmp_path, {f"docs #{i}": e for i, e in enumerate(exprs)})


def test_the_readme_join_names_the_remote_topic_through_a_real_prometheus(prometheus):
    """docs/metrics.md's join of the lag with mirrorlag_topic_info: every lag series gets the remote topic
    MM2 writes (DefaultReplicationPolicy: <source alias>.<topic>), as MM2's own metrics tag it."""
    join = readme_promql()[0]
    assert "group_left(remote_topic) mirrorlag_topic_info" in join
    result = _api(prometheus, "query", query=join)["result"]
    assert result
    for series in result:
        labels = series["metric"]
        assert labels["remote_topic"] == f"{labels['source']}.{labels['topic']}", labels
