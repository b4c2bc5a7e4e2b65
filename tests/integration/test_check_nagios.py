"""`mirrorlag check` read as Nagios reads a plugin (tests.nagios): the first line's text before `|`
is the status, the rest perfdata in the plugin grammar, and the exit code is the status. Against
the real brokers, through the real CLI at its default --timeout, which must answer inside NRPE's
10 s: a healthy estate (OK), a flow the mirror copies too slowly (WARNING), one it stopped copying
(CRITICAL), a dead cluster (UNKNOWN); and the same three run by Nagios Core itself
(tests.nagios_core)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mirrorlag.embedded import free_port
from mirrorlag.formats import OffsetSync
from tests.conftest import write_properties
from tests.helpers import eventually, running_sidecar
from tests.integration.test_check_timeout import dead_config, refused_port
from tests.nagios import parse
from tests.nagios_core import nagios_core, service_status

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"
NRPE_S = 10.0
CODES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}


def check(config: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "mirrorlag", "check", "--config", str(config), *args],
                            capture_output=True, text=True, timeout=60)
    return result, time.monotonic() - started


def nagios(result: subprocess.CompletedProcess[str]) -> tuple[str, str, dict]:
    status, text, perf = parse(result.stdout)
    assert CODES[status] == result.returncode, (result.stdout, result.stderr)
    return status, text, perf


@pytest.fixture
def estate(tmp_path, clusters, topic_name) -> tuple[Path, str]:
    """Topic with 10/4/7 records, every one copied by the syncs' word."""
    clusters.create_topic(topic_name, 3)
    clusters.produce(topic_name, {0: 10, 1: 4, 2: 7})
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared by the tests of the session; the topics differ per test
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, 9, 9), OffsetSync(topic_name, 1, 3, 3),
                                             OffsetSync(topic_name, 2, 6, 6)])
    return write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}\n"), topic_name


def test_a_healthy_estate_is_ok_within_nrpes_timeout(estate):
    config, _ = estate
    result, took = check(config)  # the default --timeout
    status, text, perf = nagios(result)
    assert (status, text) == ("OK", "3 partitions IN_SYNC"), result.stdout
    assert perf["in_sync"] == ("3", "", "", "", "0", "3") and perf["records_behind"][0] == "0"
    assert {perf[s][0] for s in ("lagging", "stalled", "at_risk", "reset", "rewind", "unknown")} == {"0"}
    assert took < NRPE_S, took


def test_a_mirror_copying_too_slowly_is_a_warning_naming_the_partition(estate, clusters):
    config, topic = estate
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 4, 4)])  # p0: 5 records behind
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "--log-level", "DEBUG", "check", "--config",
                             str(config), "--timeout", "5", "--warning-records", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []  # the check's log to its first poll: the mirror copies once the window has begun
    for line in iter(proc.stderr.readline, ""):
        said.append(line)
        if "first poll:" in line:
            break
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 6, 6)])  # it copies, but not all it owed
    out, err = proc.communicate(timeout=30)
    err = "".join(said) + err
    status, text, perf = nagios(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert status == "WARNING", out + err
    assert text.startswith(f"1 of 3 partitions not IN_SYNC: src->dst {topic}/0 LAGGING 3 records "), text
    assert re.search(r"; window \d s of 30 s: a partition behind that catches up later reads LAGGING$", text), text
    assert perf["records_behind"] == ("3", "", "2", "", "0", "") and perf["lagging"][0] == "1"
    assert perf["time_lag"][1] == "s"


def test_a_stalled_mirror_is_critical(estate, clusters):
    config, topic = estate
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 4, 4)])
    result, _ = check(config, "--timeout", "3", "--verbose")
    status, text, perf = nagios(result)
    assert status == "CRITICAL" and f"src->dst {topic}/0 STALLED 5 records" in text, result.stdout
    assert perf["stalled"][0] == "1" and perf["records_behind"][0] == "5"
    assert any("STALLED" in line and topic in line for line in result.stdout.splitlines()[1:])  # the table


def test_a_dead_cluster_is_unknown_within_nrpes_timeout(tmp_path):
    address = f"127.0.0.1:{refused_port()}"
    config = dead_config(tmp_path / "mm2.properties", address)
    result, took = check(config)
    status, text, perf = nagios(result)
    assert (status, text, perf) == ("UNKNOWN", "could not read source cluster src", {}), result.stdout
    assert f"source cluster src ({address}): " in result.stdout.splitlines()[1]
    assert took < NRPE_S, took


def test_a_bad_config_is_unknown_on_the_status_line(tmp_path):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = x:1\n")
    status, text, perf = nagios(check(config)[0])
    assert status == "UNKNOWN" and str(config) in text and perf == {}


def test_url_asks_a_running_sidecar_in_well_under_a_second(tmp_path, estate, clusters):
    """`check --url`: the sidecar's /status verdict with its age, no Kafka client of its own."""
    config, topic = estate
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 4, 4)])  # p0 behind; the sidecar's window is 30 s
    port = free_port()
    extra = tmp_path / "mirrorlag.properties"
    extra.write_text(f"mirrorlag.http.listener = 127.0.0.1:{port}\nreplication.record.lag.metric.refresh.interval = 500\n")
    url = f"http://127.0.0.1:{port}"
    with running_sidecar(config, extra, port=port, log=tmp_path / "sidecar.log"):
        eventually(lambda: _status_lag(url, 0) == 5)  # a poll after the feed has read the syncs
        result, took = _url_check(url)
        status, text, perf = nagios(result)
        # Behind for less than replication.lag.time.max.ms: IN_SYNC by KIP-16, and the sidecar says so.
        assert status == "OK" and re.search(r"^3 partitions IN_SYNC; sidecar's verdict \d s old$", text), text
        assert perf["records_behind"][0] == "5" and perf["in_sync"][0] == "3"
        # The interpreter's start and imports are most of it (half a second here, more under load):
        # measured alongside, the answer itself must take well under a second.
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import mirrorlag.cli, mirrorlag.check.url"], check=True, timeout=60)
        assert took < time.monotonic() - started + 0.5, took
        result, _ = _url_check(url, "--critical-records", "3")
        assert nagios(result)[0] == "CRITICAL", result.stdout
        result, _ = _url_check(url, "--json")
        assert result.returncode == 0 and {r["partition"] for r in json.loads(result.stdout)} == {0, 1, 2}
    result, _ = _url_check(url)
    status, text, _ = nagios(result)
    assert status == "UNKNOWN" and text.startswith(f"{url}/status: "), text


def _status_lag(url: str, partition: int) -> int | None:
    """The record lag the sidecar's /status gives a partition."""
    with urllib.request.urlopen(f"{url}/status", timeout=5) as response:
        rows = json.load(response)["partitions"]
    return next((r["record_lag"] for r in rows if r["partition"] == partition), None)


def _url_check(url: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "mirrorlag", "check", "--url", url, *args],
                            capture_output=True, text=True, timeout=60)
    return result, time.monotonic() - started


def test_a_rewind_within_the_window_is_a_warning_named_before_lagging(estate, clusters, tmp_path):
    """MM2 resumes p0 from an older commit while the check watches p2 catch up: REWIND, not the
    IN_SYNC p0 read at the first poll."""
    config, topic = estate
    extra = tmp_path / "feeds.properties"
    extra.write_text("mirrorlag.lro.feeds = offset-syncs\n")  # the syncs alone say where MM2 is
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 2, 2, 2)])  # p2: 4 records behind
    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "check", "--config", str(config), "--config", str(extra),
                             "--timeout", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic, 0, 4, 4), OffsetSync(topic, 2, 3, 3)])
    out, err = proc.communicate(timeout=30)
    status, text, perf = nagios(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert status == "WARNING", out + err
    assert text.startswith(f"2 of 3 partitions not IN_SYNC: src->dst {topic}/0 REWIND 5 records"), text
    assert f", src->dst {topic}/2 LAGGING 3 records" in text, text
    assert (perf["rewind"][0], perf["lagging"][0], perf["in_sync"][0]) == ("1", "1", "1"), perf


def test_nagios_core_runs_it_as_a_service_check(tmp_path, estate, clusters):
    """Nagios Core itself runs `mirrorlag check` as a check_command, no wrapper: the state it files
    is the exit code's, the status line its plugin output, the perfdata what it took after `|`."""
    config, topic = estate
    behind = f"{topic}-behind"
    clusters.create_topic(behind, 1)
    clusters.produce(behind, {0: 5})
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(behind, 0, 1, 1)])  # 3 records behind, no progress
    stalled = write_properties(tmp_path / "stalled.properties", clusters, f"src->dst.topics = {behind}\n")
    dead = dead_config(tmp_path / "dead.properties", f"127.0.0.1:{refused_port()}")
    command = f"{sys.executable} -m mirrorlag check --config"
    services = {"healthy": f"{command} {config}", "stalled": f"{command} {stalled}", "dead": f"{command} {dead}"}
    with nagios_core(tmp_path / "nagios", services) as status_dat:
        checked = eventually(lambda: _all_checked(status_dat, services), timeout=120, interval=1)
    healthy, stopped, unread = checked["healthy"], checked["stalled"], checked["dead"]
    assert (healthy["current_state"], healthy["plugin_output"]) == ("0", "MIRRORLAG OK - 3 partitions IN_SYNC")
    perf = dict(item.split("=", 1) for item in healthy["performance_data"].split())
    assert perf["records_behind"].split(";")[0] == "0" and perf["in_sync"] == "3;;;0;3", healthy
    assert stopped["current_state"] == "2", stopped
    assert stopped["plugin_output"].startswith(f"MIRRORLAG CRITICAL - 1 of 1 partitions not IN_SYNC: src->dst {behind}/0 STALLED 3 records")
    assert "stalled=1;;;0;1" in stopped["performance_data"].split(), stopped
    assert (unread["current_state"], unread["plugin_output"]) == ("3", "MIRRORLAG UNKNOWN - could not read source cluster src")
    assert "source cluster src (127.0.0.1:" in unread["long_plugin_output"], unread


def _all_checked(status_dat: Path, services: dict[str, str]) -> dict[str, dict[str, str]]:
    checked = service_status(status_dat) if status_dat.exists() else {}
    assert set(checked) == set(services), checked
    return checked
