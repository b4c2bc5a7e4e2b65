"""The daily tables on a small history whose answers are known exactly (one rollup, many checks)."""

from __future__ import annotations

import base64
import subprocess
from dataclasses import dataclass
from datetime import date
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mirrorlag.rollup.job import run_days
from mirrorlag.rollup.options import RollupOptions
from mirrorlag.rollup.paths import DayStatus
from tests.tools import require_tool
from tests.rollup.history import H, M, day_ms, every, series, write

DAY = date(2024, 3, 10)
SECTIONS = ["flows", "worst-partitions", "heatmap", "trends", "data-quality"]  # the report's section ids
T0 = day_ms(DAY)
S = 15_000


def _state(ts: int) -> str:
    for lo, hi, state in ((1 * H, 2 * H, "STALLED"), (5 * H, 5 * H + 30 * M, "STALLED"),
                          (10 * H, 10 * H + 10 * M, "LAGGING"), (12 * H, 12 * H + 5 * M, "AT_RISK")):
        if T0 + lo <= ts < T0 + hi:
            return state
    return "IN_SYNC"


@dataclass
class Rolled:
    out: Path
    results: list
    lags: dict[str, np.ndarray]  # record lags by partition label, for the percentile checks
    time_lags: dict[str, np.ndarray]
    tables: dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def rolled(spark, tmp_path_factory) -> Rolled:
    root = tmp_path_factory.mktemp("rollup-daily")
    history, out = root / "history", root / "out"
    rng = np.random.default_rng(1)
    day = every(T0, T0 + 24 * H, S)  # 5760 samples

    # orders/0: in sync all day, lags 0..6.
    o0 = series("A->B", "orders", 0, day, ["IN_SYNC"] * len(day), [i % 7 for i in range(len(day))])
    # orders/1: two stalls (1 h, 30 min), 10 min lagging, 5 min at risk; random lags.
    lag1 = rng.integers(0, 200_000, len(day))
    tl1 = rng.integers(0, 600_000, len(day))
    o1 = series("A->B", "orders", 1, day, [_state(t) for t in day], lag1.tolist(), tl1.tolist())
    # orders/2: no history 06:00-08:00; LAGGING for the 10 minutes before the gap.
    ts2 = every(T0, T0 + 6 * H, S) + every(T0 + 8 * H, T0 + 24 * H, S)
    o2 = series("A->B", "orders", 2, ts2, ["LAGGING" if T0 + 6 * H - 10 * M <= t < T0 + 6 * H else "IN_SYNC" for t in ts2],
                [5] * len(ts2))
    write(history, DAY, o0 + o1, name="part-0001.parquet")
    write(history, DAY, o2, name="part-0002.parquet")

    # events/0 (flow A->C): every minute from 00:00:50; 3 unrecognized states, 5 UNKNOWN without lags.
    ts3 = every(T0 + 50_000, T0 + 24 * H, M)
    states3 = ["WEIRD" if 100 <= i < 103 else "UNKNOWN" if 200 <= i < 205 else "IN_SYNC" for i in range(len(ts3))]
    lag3 = [None if 200 <= i < 205 else 1000 + i for i in range(len(ts3))]
    e0 = series("A->C", "events", 0, ts3, states3, lag3)
    # events/1: in sync until noon, then GONE.
    ts4 = every(T0, T0 + 12 * H, M) + [T0 + 12 * H]
    e1 = series("A->C", "events", 1, ts4, ["IN_SYNC"] * 720 + ["GONE"], [3] * 720 + [None])
    # Schema drift: a column the rollup does not know.
    write(history, DAY, e0 + e1, name="part-0003.parquet", extra={"experimental": ["x"] * (len(e0) + len(e1))})
    # What a crashed writer and Hadoop leave behind: never read.
    (history / f"date={DAY}" / ".part-0004.parquet.tmp").write_bytes(b"half a segment")
    (history / f"date={DAY}" / "_SUCCESS").write_bytes(b"")

    results = run_days(spark, RollupOptions(str(history), str(out), [DAY], report=True))
    tables = {}
    for level, keys in (("partition", ["flow", "topic", "partition"]), ("topic", ["flow", "topic"]), ("flow", ["flow"])):
        df = spark.read.parquet(str(out / f"{level}_daily"))
        tables[level] = [r.asDict() for r in df.orderBy(*keys).collect()]
    return Rolled(
        out, results,
        lags={"orders/0": np.array([i % 7 for i in range(len(day))]), "orders/1": lag1, "orders/2": np.full(len(ts2), 5)},
        time_lags={"orders/1": tl1},
        tables=tables,
    )


def _part(rolled: Rolled, topic: str, partition: int) -> dict[str, Any]:
    [row] = [r for r in rolled.tables["partition"] if r["topic"] == topic and r["partition"] == partition]
    return row


def test_one_row_per_partition_topic_and_flow(rolled):
    assert rolled.results[0].status is DayStatus.PRESENT
    assert [(r["flow"], r["topic"], r["partition"]) for r in rolled.tables["partition"]] == [
        ("A->B", "orders", 0), ("A->B", "orders", 1), ("A->B", "orders", 2), ("A->C", "events", 0), ("A->C", "events", 1)]
    assert [(r["flow"], r["topic"], r["partitions"]) for r in rolled.tables["topic"]] == [("A->B", "orders", 3), ("A->C", "events", 2)]
    assert [(r["flow"], r["topics"], r["partitions"]) for r in rolled.tables["flow"]] == [("A->B", 1, 3), ("A->C", 1, 2)]
    assert all(str(r["date"]) == DAY.isoformat() for rows in rolled.tables.values() for r in rows)


def test_each_days_file_is_in_key_order(rolled):
    # One file a day, its rows sorted by the level's key (job.write_table), read as written.
    import pyarrow.parquet as pq

    for table, keys in (("partition_daily", ["source", "target", "topic", "partition"]),
                        ("topic_daily", ["source", "target", "topic"]), ("flow_daily", ["source", "target"]),
                        ("trends", ["level", "source", "target", "topic", "partition"])):
        [path] = (rolled.out / table / f"date={DAY}").glob("*.parquet")
        rows = pq.read_table(path).select(keys).to_pylist()
        assert len(rows) > 1
        assert rows == sorted(rows, key=lambda r: [(r[k] is not None, r[k]) for k in keys]), table


def test_in_sync_partition(rolled):
    p = _part(rolled, "orders", 0)
    assert (p["samples"], p["coverage"], p["out_of_sync_seconds"], p["stall_episodes"]) == (5760, 1.0, 0.0, 0)
    assert (p["record_lag_min"], p["record_lag_max"]) == (0, 6)
    assert p["out_of_sync_seconds_by_hour"] == [0.0] * 24


def _look_back(rolled: Rolled, at_ms: int) -> float:
    """How far before its sample at T0 + at_ms orders/1's stall starts: where its (random) time
    lag says, at most back to the previous sample 15 s before."""
    return min(int(rolled.time_lags["orders/1"][at_ms // S]), S) / 1000


def test_stalls_lagging_and_at_risk(rolled):
    p = _part(rolled, "orders", 1)
    first, second = _look_back(rolled, 1 * H), _look_back(rolled, 5 * H)
    assert p["out_of_sync_seconds"] == 3600 + 1800 + 600 + 300 + first + second
    assert (p["stalled_seconds"], p["at_risk_seconds"]) == (5400 + first + second, 300)
    assert (p["stall_episodes"], p["longest_stall_seconds"]) == (2, 3600 + first)
    hours = [0.0] * 24
    hours[1], hours[5], hours[10], hours[12] = 3600 + first, 1800 + second, 600, 300
    assert p["out_of_sync_seconds_by_hour"] == hours


def test_gap_in_history_is_capped_not_out_of_sync(rolled):
    p = _part(rolled, "orders", 2)
    # 40 LAGGING samples: 39 full 15 s intervals and the last before the gap capped at 60 s.
    assert p["out_of_sync_seconds"] == 39 * 15 + 60
    assert p["covered_seconds"] == (1439 * 15 + 60) + 3840 * 15
    assert p["coverage"] == pytest.approx(p["covered_seconds"] / 86_400)
    assert p["samples"] == 1440 + 3840
    # The heat map's denominators: none in hours 6 and 7; the last sample before the gap starts in
    # hour 5 and accounts for 60 s (capped), not 15.
    hours = p["covered_seconds_by_hour"]
    assert (hours[5], hours[6], hours[7], hours[8]) == (3600 - 15 + 60, 0, 0, 3600)
    assert sum(hours) == p["covered_seconds"]


def test_unknown_states_and_null_lags_are_counted(rolled):
    p = _part(rolled, "events", 0)
    assert p["samples"] == 1440
    assert (p["unknown_state_samples"], p["null_record_lag_samples"], p["null_time_lag_samples"]) == (3, 5, 5)
    assert p["out_of_sync_seconds"] == 8 * 60  # unrecognized and UNKNOWN are not in sync
    # The day's last sample (23:59:50) accounts for 10 s, not the 60 s cap; its first (00:00:50)
    # for the 50 s since midnight too.
    assert p["covered_seconds"] == 1439 * 60 + 10 + 50
    assert p["out_of_sync_seconds_by_hour"][1] == 180 and p["out_of_sync_seconds_by_hour"][3] == 300
    lags = [1000 + i for i in range(1440) if not 200 <= i < 205]
    assert (p["record_lag_min"], p["record_lag_max"]) == (min(lags), max(lags))
    assert p["record_lag_avg"] == pytest.approx(np.mean(lags))


def test_gone_covers_no_time(rolled):
    p = _part(rolled, "events", 1)
    assert (p["samples"], p["covered_seconds"], p["coverage"], p["out_of_sync_seconds"]) == (721, 43_200, 0.5, 0)
    assert p["null_record_lag_samples"] == 1


def _nearest_rank(x: np.ndarray, per_mille: int) -> int:
    s = np.sort(x)
    return int(s[max(1, (per_mille * len(s) + 999) // 1000) - 1])


def _check_percentiles(row: dict[str, Any], values: np.ndarray, prefix: str = "record_lag", scale: float = 1.0) -> None:
    for name, per_mille in (("p50", 500), ("p95", 950), ("p99", 990)):
        exact = _nearest_rank(values, per_mille) / scale
        got = row[f"{prefix}_{name}{'_s' if scale != 1.0 else ''}"]
        # Stated error (histograms.py): never below the exact percentile, at most 1 % above.
        assert exact <= got <= exact * 1.01 + 1e-9, (name, exact, got)
        if exact * scale < 100:
            assert got == exact
        # ... and so within the same bound of numpy's own nearest-rank percentile.
        np_value = np.percentile(values, per_mille / 10, method="inverted_cdf") / scale
        assert np_value * 0.99 <= got <= np_value * 1.01 + 1e-9


def test_percentiles_against_numpy(rolled):
    _check_percentiles(_part(rolled, "orders", 1), rolled.lags["orders/1"])
    _check_percentiles(_part(rolled, "orders", 1), rolled.time_lags["orders/1"], "time_lag", 1000.0)
    _check_percentiles(_part(rolled, "orders", 0), rolled.lags["orders/0"])
    # A topic's percentiles are over all its partitions' samples.
    orders = np.concatenate(list(rolled.lags.values()))
    [topic] = [r for r in rolled.tables["topic"] if r["topic"] == "orders"]
    _check_percentiles(topic, orders)
    assert (topic["record_lag_min"], topic["record_lag_max"]) == (orders.min(), orders.max())
    assert topic["record_lag_avg"] == pytest.approx(orders.mean())
    [flow] = [r for r in rolled.tables["flow"] if r["flow"] == "A->B"]
    _check_percentiles(flow, orders)


def test_topic_and_flow_add_up_partition_seconds(rolled):
    [orders, events] = rolled.tables["topic"]
    backs = _look_back(rolled, 1 * H) + _look_back(rolled, 5 * H)
    assert orders["out_of_sync_seconds"] == 6300 + 645 + backs
    assert orders["samples"] == 5760 * 2 + 1440 + 3840
    assert orders["coverage"] == pytest.approx((86_400 * 2 + 79_245) / (3 * 86_400))
    assert (orders["stall_episodes"], orders["longest_stall_seconds"], orders["at_risk_seconds"]) == \
        (2, 3600 + _look_back(rolled, 1 * H), 300)
    assert events["coverage"] == pytest.approx((86_400 + 43_200) / (2 * 86_400))
    assert (events["unknown_state_samples"], events["null_record_lag_samples"]) == (3, 6)
    for level in ("topic", "flow"):
        for row in rolled.tables[level]:
            assert sum(row["out_of_sync_seconds_by_hour"]) == pytest.approx(row["out_of_sync_seconds"])
            assert sum(row["covered_seconds_by_hour"]) == pytest.approx(row["covered_seconds"])
    [ab, ac] = rolled.tables["flow"]
    assert (ab["out_of_sync_seconds"], ac["out_of_sync_seconds"]) == (6945 + backs, 480)
    assert ab["time_lag_max_s"] == rolled.time_lags["orders/1"].max() / 1000.0


def test_result_summary(rolled):
    r = rolled.results[0]
    assert (r.flows, r.topics, r.partitions, r.samples) == (2, 2, 5, 5760 * 2 + 5280 + 1440 + 721)
    assert r.out_of_sync_seconds == 6945 + 480 + _look_back(rolled, 1 * H) + _look_back(rolled, 5 * H)
    assert (r.unknown_state_samples, r.null_record_lag_samples) == (3, 6)
    assert r.report and Path(r.report).is_file()


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.imgs: list[str] = []
        self.external: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "img":
            self.imgs.append(a.get("src") or "")
        for attr in ("src", "href"):
            if (a.get(attr) or "").startswith(("http:", "https:", "//", "file:")) or (tag in ("link", "script") and a.get(attr)):
                self.external.append(f"{tag} {attr}={a.get(attr)}")


def test_report_is_self_contained(rolled):
    text = Path(rolled.results[0].report).read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    assert set(SECTIONS) <= page.ids
    assert len(page.imgs) >= 3  # flows, worst partitions' lag over the day, heat map
    for src in page.imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert page.external == []
    assert "<title>mirrorlag — replication lag on 2024-03-10</title>" in text
    assert "A-&gt;B orders[1]" in text  # the worst partition is in the table


def test_report_renders_in_chromium(rolled, tmp_path):
    chromium = require_tool("chromium", "chromium fonts-dejavu-core")
    shot = tmp_path / "report.png"
    proc = subprocess.run([
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1400,2400",
        Path(rolled.results[0].report).as_uri(),
    ], capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1400, 2400)
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 200  # text, tables and charts, not a blank page
