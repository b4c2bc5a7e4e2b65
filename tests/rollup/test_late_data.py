"""Late data and finality through the command line (docs/design.md §7, issue 32): a day rolled up from
half its history, the rest arriving later, the next run rolling it up again and the later days'
trends recomputed; a re-run with fewer inputs refused; a provisional day; a run killed between its
table writes; expiry racing a failed rollup. The provisional day and the killed run are processes
of their own, as cron starts them; the other runs go through the command's own entry in this
process, on the suite's Spark session (tests/rollup/cli_run.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mirrorlag.history.expiry import Expirer, local_receipt
from mirrorlag.history.layout import ROLLUP_RECEIPT
from mirrorlag.rollup.manifest import Manifest
from mirrorlag.rollup.paths import committed_files, manifests, table_days
from tests.rollup.cli_run import rollup
from tests.rollup.history import H, day_ms, every, series, write

REPO = Path(__file__).resolve().parents[2]
TODAY = datetime.now(timezone.utc).date()
D1, D2, D3 = (TODAY - timedelta(days=k) for k in (3, 2, 1))
# Samples every 5 minutes, each accounting for its 5 minutes.
COMMON = ("--no-report", "--max-gap-seconds", "300")


def mirrorlag(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`mirrorlag rollup` in a process of its own, as cron runs it."""
    proc = subprocess.run([sys.executable, "-m", "mirrorlag", "rollup", *COMMON, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def nightly(spark, *args: str) -> subprocess.CompletedProcess:
    """`mirrorlag rollup` in this process, on the suite's session (cli_run)."""
    return rollup(spark, *COMMON, *args)


def hours(history: Path, day: date, first: int, last: int, lag: int, name: str, state: str = "IN_SYNC") -> Path:
    """One segment of partition 0 from `first` to `last` o'clock, every 5 minutes."""
    ts = every(day_ms(day) + first * H, day_ms(day) + last * H, 300_000)
    return write(history, day, series("A->B", "orders", 0, ts, [state] * len(ts), [lag] * len(ts)), name=name)


def rows(out: Path, table: str, day: date) -> list[dict]:
    """The day's committed rows (the files its manifest names), read without Spark."""
    manifest = manifests(str(out), None)[day]
    return [r for f in committed_files(str(out), table, day, manifest) for r in pq.read_table(f).to_pylist()]


def flow_trend(out: Path, day: date) -> dict:
    [row] = [r for r in rows(out, "trends", day) if r["level"] == "flow"]
    return row


def manifest_text(out: Path, day: date) -> str:
    return (out / "_manifests" / f"date={day}.json").read_text()


@pytest.fixture(scope="module")
def late(spark, tmp_path_factory):
    """D1 rolled up from its first 12 hours (p95 100, in sync); D2 and D3 at 5,000 out of sync."""
    root = tmp_path_factory.mktemp("late")
    history, out = root / "history", root / "out"
    hours(history, D1, 0, 12, 100, "part-a.parquet")
    for day in (D2, D3):
        hours(history, day, 0, 24, 5000, "part-0.parquet", "LAGGING")
    first = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    return history, out, first


def test_late_segments_roll_the_day_up_again_and_the_later_trends_follow(spark, late):
    history, out, first = late
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # The nightly form (no --date): the lookback's days without history are no failure.
    assert f"{D1 - timedelta(days=3)}  no history" in first.stdout
    before = flow_trend(out, D2)
    assert before["record_lag_p95_dod"] == pytest.approx(4900, rel=0.02)
    assert before["out_of_sync_seconds_dod"] == 86_400
    assert rows(out, "flow_daily", D1)[0]["samples"] == 144

    # The second half of D1 arrives late: lag 10,000 and out of sync.
    hours(history, D1, 12, 24, 10_000, "part-b.parquet", "LAGGING")
    second = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"✓ {D1}" in second.stdout
    assert f"↻ {D2}  trends recomputed" in second.stdout and f"↻ {D3}  trends recomputed" in second.stdout
    [flow] = rows(out, "flow_daily", D1)
    assert flow["samples"] == 288 and flow["final"] is True
    after = flow_trend(out, D2)
    assert after["record_lag_p95_dod"] == pytest.approx(5000 - 10_000, rel=0.02)  # the sign flipped
    assert after["out_of_sync_seconds_dod"] == 86_400 - 43_200
    assert flow_trend(out, D3)["record_lag_p95_dod"] == 0
    m = Manifest.from_json(manifest_text(out, D1), "D1")
    assert [s.name for s in m.segments] == ["part-a.parquet", "part-b.parquet"]
    # The replaced version's files are gone: a plain read of a day's directory is the committed one.
    for table in ("partition_daily", "topic_daily", "flow_daily", "trends"):
        for day in (D1, D2, D3):
            assert len(list((out / table / f"date={day}").glob("*.parquet"))) == 1
    # The receipt in the history, for the sidecar's expiry, names what was read.
    assert json.loads((history / f"date={D1}" / ROLLUP_RECEIPT).read_text())["segments"][1][0] == "part-b.parquet"

    # Nothing new: nothing rolled up, no Spark started, nothing written.
    written = {d: manifest_text(out, d) for d in (D1, D2, D3)}
    third = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    assert third.returncode == 0 and f"{D1}  unchanged" in third.stdout and "starting Spark" not in third.stdout
    assert {d: manifest_text(out, d) for d in (D1, D2, D3)} == written


def test_a_night_missed_past_the_lookback_and_a_lost_receipt_are_caught_up(spark, tmp_path):
    """The sidecar keeps an unreceipted day up to retention.max (14 days), longer than the 7-day
    lookback: the nightly run rolls up every day of the history without a receipt, however old. A
    committed day whose receipt is gone from the history gets it back at the next run, unchanged."""
    history, out = tmp_path / "history", tmp_path / "out"
    old = TODAY - timedelta(days=10)  # missed for ten nights
    for day in (old, D3):
        hours(history, day, 0, 24, 100, "part-a.parquet")
    first = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert f"✓ {old}" in first.stdout and f"✓ {D3}" in first.stdout, first.stdout
    assert rows(out, "flow_daily", old)[0]["samples"] == 288
    for day in (old, D3):
        assert Manifest.from_json((history / f"date={day}" / ROLLUP_RECEIPT).read_text(), "receipt").day == day

    (history / f"date={D3}" / ROLLUP_RECEIPT).unlink()
    written = manifest_text(out, D3)
    second = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"{D3}  unchanged since its rollup  its receipt in the history was missing: written again" in second.stdout, \
        second.stdout
    assert str(old) not in second.stdout  # receipted now: past the lookback, left alone
    assert (history / f"date={D3}" / ROLLUP_RECEIPT).read_text() == written == manifest_text(out, D3)


def test_fewer_inputs_keep_the_day_refused_without_force(spark, late):
    history, out, _ = late
    written = manifest_text(out, D1)
    assert len(Manifest.from_json(written, "D1").segments) == 2  # the test above ran first (file order)
    gone = history / f"date={D1}" / "part-b.parquet"
    gone.rename(gone.with_name(".part-b.parquet.away"))  # expired, say
    kept = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    assert kept.returncode == 0 and f"! {D1}  kept as rolled up" in kept.stdout
    asked = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0", "--date", str(D1))
    assert asked.returncode == 2 and asked.stderr.count("\n") == 1, asked.stderr
    assert asked.stderr.startswith(f"mirrorlag: error: {D1}: not rolled up again: it was rolled up from 2 segments")
    assert "1 of them are gone or smaller" in asked.stderr and "--force" in asked.stderr
    assert manifest_text(out, D1) == written
    forced = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0", "--date", str(D1), "--force")
    assert forced.returncode == 0, forced.stdout[-3000:] + forced.stderr[-3000:]
    assert rows(out, "flow_daily", D1)[0]["samples"] == 144
    assert flow_trend(out, D2)["record_lag_p95_dod"] == pytest.approx(4900, rel=0.02)  # the later trends follow
    gone.with_name(".part-b.parquet.away").rename(gone)


def test_today_is_provisional_and_stays_out_of_the_trends(tmp_path):
    # "Today" is read when the test runs, not when the module is collected: a suite that crosses
    # midnight UTC would roll up yesterday, which is final. Should midnight fall within this run,
    # the run is repeated on the new day.
    for attempt in range(2):
        today = datetime.now(timezone.utc).date()
        history, out = tmp_path / f"history-{attempt}", tmp_path / f"out-{attempt}"
        hours(history, today, 0, 1, 7, "part-0.parquet")
        proc = mirrorlag("--history", str(history), "--out", str(out), "--settle-minutes", "0", "--date", str(today))
        if datetime.now(timezone.utc).date() == today:
            break
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "provisional" in proc.stdout
    for table in ("partition_daily", "topic_daily", "flow_daily", "trends"):
        assert {r["final"] for r in rows(out, table, today)} == {False}, table
    assert Manifest.from_json(manifest_text(out, today), "today").final is False
    assert table_days(str(out / "flow_daily"), None) == []  # what other days' trends read: final days only
    tomorrow = mirrorlag("--history", str(history), "--out", str(out), "--date", str(today + timedelta(days=1)))
    assert tomorrow.returncode == 2 and "has not begun" in tomorrow.stderr


def test_a_run_killed_between_its_writes_leaves_the_previous_day(spark, tmp_path):
    history, out = tmp_path / "history", tmp_path / "out"
    hours(history, D2, 0, 12, 100, "part-a.parquet")
    first = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0", "--date", str(D2))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    committed = manifest_text(out, D2)
    before = {t: rows(out, t, D2) for t in ("partition_daily", "topic_daily", "flow_daily", "trends")}
    hours(history, D2, 12, 24, 9000, "part-b.parquet")

    proc = subprocess.Popen([sys.executable, "-m", "mirrorlag", "rollup", *COMMON, "--history", str(history),
                             "--out", str(out), "--settle-minutes", "0", "--date", str(D2)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    names = {t: set(Manifest.from_json(committed, "x").files[t]) for t in before}
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            new = [f for t in before for f in (out / t / f"date={D2}").glob("*.parquet") if f.name not in names[t]]
            if new:
                break
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-day
        proc.wait()
    assert new, "the run finished before any table was written"
    assert manifest_text(out, D2) == committed, "killed too late: the day was committed already"
    # The previous state, whole, through the manifest; the killed run's files are beside it.
    assert {t: rows(out, t, D2) for t in before} == before
    assert table_days(str(out / "flow_daily"), None) == [D2]

    again = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert rows(out, "flow_daily", D2)[0]["samples"] == 288
    for t in before:  # the leftovers are gone
        assert len(list((out / t / f"date={D2}").glob("*.parquet"))) == 1


def test_expiry_racing_a_failed_rollup_keeps_the_segments(spark, tmp_path):
    history, out = tmp_path / "history", tmp_path / "out"
    # Named as the sidecar names them: expiry looks at nothing else.
    good = hours(history, D1, 0, 24, 100, "part-0000000000001-abcdef01.parquet")
    bad = history / f"date={D1}" / "part-0000000000002-abcdef02.parquet"
    bad.write_bytes(b"not parquet at all")
    failed = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0", "--date", str(D1))
    last = failed.stderr.strip().splitlines()[-1]
    assert failed.returncode == 2 and last.startswith(f"mirrorlag: error: {D1}: Spark failed"), last
    later = time.time() + 30 * 86400.0  # the segments are long past retention, within the hard limit
    expirer = Expirer(history, 7 * 86400.0, require_uploaded=False, max_age_s=60 * 86400.0,
                      receipts=local_receipt, clock=lambda: later)
    assert expirer.run_once() == 0 and good.exists() and bad.exists()
    bad.unlink()
    done = nightly(spark, "--history", str(history), "--out", str(out), "--settle-minutes", "0", "--date", str(D1))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert expirer.run_once() == 1 and not good.exists()
