"""The consumer groups' day (rollup/group_daily.py): from the sidecar's group rows in
`<history>/_groups/`, one row per flow and group, committed with the day's other tables."""

from __future__ import annotations

import json
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorlag.history.expiry import receipt_names
from mirrorlag.history.group_schema import GROUPS_DIR, SCHEMA as GROUPS_SCHEMA
from mirrorlag.history.layout import ROLLUP_RECEIPT
from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.manifest import Action
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.paths import DayStatus
from tests.rollup.history import H, M, day_ms, every, series, write

DAY = date(2024, 5, 6)
T0 = day_ms(DAY)


def _group_rows(group: str, ts_ms: list[int], partitions: dict[int, tuple[str, int | None]] | None = None,
                per_ts=None) -> list[dict]:
    rows = []
    for ts in ts_ms:
        for partition, (state, reread) in (per_ts(ts) if per_ts else partitions).items():
            rows.append({"ts": ts, "source": "A", "target": "B", "group": group, "topic": "orders",
                         "partition": partition, "committed": 100, "resume_source_offset": None if reread is None else 100 - reread,
                         "reread_records": reread, "skipped_records": 0, "not_yet_mirrored_records": 0,
                         "checkpoint_age_ms": 5_000, "state": state,
                         "because": None if reread is not None else "no sync at or below the committed offset",
                         "active_on_target": False, "writer": "pod-a:9464", "refresh_interval_ms": M})
    return rows


@pytest.fixture(scope="module")
def rolled(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("group-daily")
    history, out = root / "history", root / "out"
    write(history, DAY, series("A->B", "orders", 0, every(T0, T0 + 24 * H, M), ["IN_SYNC"] * 1440, [0] * 1440))
    runs = every(T0, T0 + 18 * H, M)  # the sidecar read groups until 18:00, then stopped
    # billing: READY until noon (re-read 10 + 20), then its partition 0 re-reads 5,000.
    billing = _group_rows("billing", runs, per_ts=lambda ts: {
        0: ("READY", 10) if ts < T0 + 12 * H else ("REREAD_HIGH", 5_000), 1: ("READY", 20)})
    audit = _group_rows("audit", runs, {0: ("NOT_CHECKPOINTED", None)})
    day_dir = history / GROUPS_DIR / f"date={DAY}"
    day_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(billing + audit, schema=GROUPS_SCHEMA), day_dir / "part-0.parquet")
    results = run_days(spark, RollupOptions(str(history), str(out), [DAY], report=True))
    rows = {r["group"]: r.asDict() for r in spark.read.parquet(str(out / "group_daily")).collect()}
    return results, rows, out


def test_a_groups_day_reads_its_samples_with_the_writers_interval(rolled):
    _, rows, _ = rolled
    billing = rows["billing"]
    assert billing["samples"] == 1080 and billing["partitions"] == 2
    # Each run stands for the minute to the next; the last for 4 intervals (the sidecar stopped).
    assert billing["covered_seconds"] == 1079 * 60 + 240
    assert billing["ready_seconds"] == 12 * 3600
    assert billing["ready_ratio"] == pytest.approx(12 * 3600 / (1079 * 60 + 240))
    assert billing["coverage"] == pytest.approx((1079 * 60 + 240) / 86_400)
    # Re-read per run: the sum over its partitions; 720 runs at 30, 360 at 5,020.
    assert (billing["reread_p50"], billing["reread_p99"], billing["reread_max"]) == (30, 5020, 5020)
    assert (billing["worst_state"], billing["samples_reread_unknown"], str(billing["date"])) == ("REREAD_HIGH", 0, str(DAY))


def test_a_group_never_checkpointed_has_no_reread_figures_and_is_never_ready(rolled):
    _, rows, _ = rolled
    audit = rows["audit"]
    assert (audit["reread_p50"], audit["reread_max"], audit["samples_reread_unknown"]) == (None, None, 1080)
    assert (audit["ready_ratio"], audit["worst_state"]) == (0.0, "NOT_CHECKPOINTED")


def test_the_groups_table_is_committed_with_the_day(rolled):
    results, rows, out = rolled
    (manifest,) = (out / "_manifests").glob("*.json")
    files = json.loads(manifest.read_text())["files"]
    assert files["group_daily"] and all((out / "group_daily" / f"date={DAY}" / f).exists() for f in files["group_daily"])
    assert {r["final"] for r in rows.values()} == {True}


def test_the_report_shows_the_groups_least_ready_first(rolled):
    _, _, out = rolled
    html = (out / "reports" / f"mirrorlag-{DAY}.html").read_text()
    section = html[html.index('<section id="groups">'):]
    section = section[:section.index("</section>")]
    assert "Failover readiness of the consumer groups" in section
    assert section.index(">audit<") < section.index(">billing<")  # never READY, then 66.5 %
    assert "NOT_CHECKPOINTED" in section and "REREAD_HIGH" in section and "5,020" in section


def test_the_groups_segments_are_inputs_of_the_day_receipted_for_expiry_and_a_late_one_rolls_it_again(spark, tmp_path):
    history, out = tmp_path / "history", tmp_path / "out"
    write(history, DAY, series("A->B", "orders", 0, every(T0, T0 + 24 * H, M), ["IN_SYNC"] * 1440, [0] * 1440))
    groups_dir = history / GROUPS_DIR / f"date={DAY}"
    groups_dir.mkdir(parents=True)
    morning = _group_rows("billing", every(T0, T0 + 12 * H, M), {0: ("READY", 10)})
    pq.write_table(pa.Table.from_pylist(morning, schema=GROUPS_SCHEMA), groups_dir / "part-0.parquet")
    nightly = RollupOptions(str(history), str(out), [DAY], report=False, lookback=True, now_ms=T0 + 30 * H)
    [first] = run_days(spark, nightly)
    manifest = json.loads((out / "_manifests" / f"date={DAY}.json").read_text())
    assert [name for name, _, _ in manifest["group_segments"]] == ["part-0.parquet"]
    # The sidecar's expiry of _groups/ waits for a receipt in that directory naming its segments.
    receipt = json.loads((groups_dir / ROLLUP_RECEIPT).read_text())
    assert [name for name, _, _ in receipt["segments"]] == ["part-0.parquet"] and receipt["group_segments"] == []
    assert receipt_names((groups_dir / ROLLUP_RECEIPT).read_text()) == {"part-0.parquet"}

    # Unchanged: the next night leaves the day alone.
    [again] = run_days(spark, nightly)
    assert again.action is Action.UNCHANGED
    # The afternoon's group rows arrive late (the partitions' history unchanged): rolled up again.
    afternoon = _group_rows("billing", every(T0 + 12 * H, T0 + 24 * H, M), {0: ("REREAD_HIGH", 5_000)})
    pq.write_table(pa.Table.from_pylist(afternoon, schema=GROUPS_SCHEMA), groups_dir / "part-1.parquet")
    [late] = run_days(spark, nightly)
    assert late.status is DayStatus.PRESENT and first.status is DayStatus.PRESENT
    [billing] = spark.read.parquet(str(out / "group_daily")).collect()
    assert (billing["samples"], billing["reread_max"], billing["worst_state"]) == (1440, 5000, "REREAD_HIGH")
    receipt = json.loads((groups_dir / ROLLUP_RECEIPT).read_text())
    assert sorted(name for name, _, _ in receipt["segments"]) == ["part-0.parquet", "part-1.parquet"]
    # A group segment gone (expired by age alone, say): the committed day is kept, not replaced.
    (groups_dir / "part-0.parquet").unlink()
    [kept] = run_days(spark, nightly)
    assert kept.action is Action.KEEP and "1 group segments" in kept.why
