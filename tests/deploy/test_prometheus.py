"""deploy/prometheus: the rules pass `promtool check rules`, their unit tests pass `promtool test
rules`, the compose Prometheus config passes `promtool check config`, and the unit tests cover every
alert both firing and not firing. (That every metric the rules name is exported by a real sidecar
is checked in test_metric_names.py.)"""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.common import PROMETHEUS, RULES, run_tool, yaml_docs
from tests.tools import require_tool

RULE_TESTS = PROMETHEUS / "tests" / "mirrorlag-rules.test.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    return require_tool("promtool", "prometheus")


def alerts() -> list[dict]:
    return [r for g in yaml_docs(RULES)[0]["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_check_rules(promtool):
    out = run_tool([promtool, "check", "rules", str(RULES)])
    assert "SUCCESS" in out.stdout


def test_promtool_test_rules(promtool):
    out = run_tool([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent)
    assert "SUCCESS" in out.stdout


def test_promtool_check_config_of_the_compose_prometheus(promtool):
    out = run_tool([promtool, "check", "config", "prometheus.yml"], cwd=PROMETHEUS)
    assert "1 rule files found" in out.stdout  # the rules were loaded and checked too


def test_every_alert_is_unit_tested_firing_and_not_firing():
    cases = [case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for case in test.get("alert_rule_test", [])]
    for rule in alerts():
        name = rule["alert"]
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), f"{name} is never tested firing"
        assert any(not c["exp_alerts"] for c in mine), f"{name} is never tested not firing"


def test_the_alerts_the_issue_asks_for_exist_with_severity_and_summary():
    by_name = {r["alert"]: r for r in alerts()}
    wanted = {
        "MirrorlagPartitionLagging": "mirrorlag_replication_time_lag_seconds",
        "MirrorlagFlowHeartbeatStale": "mirrorlag_flow_heartbeat_age_seconds",
        "MirrorlagRetentionHeadroomAtRisk": "mirrorlag_retention_headroom_seconds",
        "MirrorlagRecordsLost": "mirrorlag_records_lost_total",
        "MirrorlagNotPolling": "mirrorlag_last_successful_poll_timestamp_seconds",
        "MirrorlagDown": "up",
        "MirrorlagHistoryUploadBacklogGrowing": "mirrorlag_history_pending_upload_bytes",
    }
    for name, metric in wanted.items():
        assert metric in by_name[name]["expr"], name
    for rule in by_name.values():
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    records = [r["record"] for g in yaml_docs(RULES)[0]["groups"] for r in g["rules"] if "record" in r]
    assert records and all(r.startswith("source_target:") for r in records)  # per-flow aggregates
