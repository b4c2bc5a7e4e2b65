"""The report's words for growth on either measure (p95 lag, time out of sync): the summary card,
the tags and the paragraph that says what growing means. No Spark: the model as trend_views
makes it."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

from mirrorlag.rollup import report, trend_figures, trend_rule
from mirrorlag.rollup.report_model import ReportData


def _data(**kw) -> ReportData:
    flows = [{"flow": "A->B", "topics": 1, "partitions": 4, "samples": 10, "out_of_sync_seconds": 60.0,
              "covered_seconds": 600.0, "stall_episodes": 0, "longest_stall_seconds": 0.0}]
    d = ReportData(day=date(2024, 5, 6), history="h", out="o", max_gap_seconds=60.0, worst_n=10, flows=flows,
                   worst_partitions=[], series=[], heat_labels=[], heat_share=[], heat_topics_total=1,
                   trend_rows=[], flow_trends={}, growing={})
    return dataclasses.replace(d, **kw)


def test_the_card_counts_either_measure_and_says_which():
    d = _data(growing={"partition": 3, "topic": 1},
              growing_by={"p95 lag": {"partition": 3}, "time out of sync": {"partition": 1, "topic": 1}})
    html = report._summary(d)
    assert '<div class="v">4</div>' in html  # 3 + 1 entities, one partition growing on both
    assert "3 partitions (p95 lag), 1 partition (time out of sync), 1 topic (time out of sync)" in html
    assert "none" in report._summary(_data())


def test_tags_name_the_measures():
    both = report._grow_tags({"growing": True, "out_of_sync_growing": True})
    assert "growing: p95 lag" in both and "growing: time out of sync" in both
    assert report._grow_tags({"growing": False, "out_of_sync_growing": True}).count("tag grow") == 1
    assert "no" in report._grow_tags({"growing": False, "out_of_sync_growing": False})
    assert report._grow_tags({}) == "–"


def test_the_words_take_their_numbers_from_the_rule_and_the_bench():
    assert f"{trend_rule.MIN_CHANGE:,.0f} records" in report.GROWING
    assert f"{trend_rule.MIN_CHANGE_SECONDS:,.0f} s" in report.GROWING
    assert "time out of sync" in report.GROWING
    s = trend_figures.summary()
    assert f"at most {s.steady_max:.1%} of the days judged" in report.GROWING  # trend_figures.json's
    assert "95 %" not in report.GROWING and "Under 4 weeks of history: no flag" in report.GROWING


def test_the_figures_are_the_bench_s_and_the_docs_quote_them():
    """trend_figures.json holds both generators' rows of every family; the docs' generated
    blocks are what the bench would write from it (no percentage typed by hand)."""
    data = trend_figures.figures()
    generators = {r["generator"] for r in data["rows"]}
    assert generators == {"own", "independent"} and data["series"] >= 1000
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs/history-and-rollup.md").read_text()
    assert trend_figures.block_of(doc) == trend_figures.doc_block(data)
    readme = (root / "README.md").read_text()
    assert trend_figures.block_of(readme) == trend_figures.words() + "\n"


def test_a_flag_shows_its_evidence():
    row = {"growing": True, "change_7d": 1_500.0, "change_7d_ratio": 0.15, "noise_7d": 400.0, "score_7d": 3.7,
           "needed_7d": 2.9, "daily_noise_7d": 0.12, "weeks_7d": 7, "up_7d": 6, "compared_7d": 7,
           "out_of_sync_growing": False}
    html = report._evidence(row)
    assert "p95 lag: +1,500 (+15%)" in html and "3.7× its noise of 400 (needs 2.9)" in html
    assert "6 of 7 days up" in html and "daily noise 12%, 7 weeks of history" in html
    s = trend_figures.summary()
    assert f"{s.within[(10, 0.2)]:.0%} of simulated series at 20% noise" in html  # 12 %: the 20 % row
    assert report._evidence({"growing": False}) == ""
    assert "each of the last 4 weeks 10% or more above the one before" in report._evidence(dict(row, rising_7d=True))


def _flow() -> dict:
    keys = ["topics", "partitions", "samples", "record_lag_p50", "record_lag_p95", "record_lag_p99", "record_lag_max",
            "time_lag_p95_s", "time_lag_max_s", "out_of_sync_seconds", "at_risk_seconds", "stall_episodes",
            "longest_stall_seconds", "unknown_state_samples", "null_record_lag_samples", "null_time_lag_samples"]
    return {"flow": "A->B", "source": "A", "target": "B", **{k: 1 for k in keys}, "coverage": 1.0,
            "covered_seconds": 86_400.0, "first_ts": None, "last_ts": None}


def test_recomputed_trends_replace_the_tags_and_the_card():
    """report.with_trends: a page whose flow grew on time out of sync, its trends recomputed to
    growth on p95 lag only."""
    from mirrorlag.rollup.report_model import TrendViews

    flows = [_flow()]
    oos = {"flow": "A->B", "level": "flow", "growing": False, "out_of_sync_growing": True}
    html = report.render(_data(flows=flows, flow_trends={"A->B": oos}, growing={"flow": 1},
                               growing_by={"time out of sync": {"flow": 1}}))
    assert "growing: time out of sync" in html and "1 flow (time out of sync)" in html
    p95 = dict(oos, growing=True, out_of_sync_growing=False)
    again = report.with_trends(html, flows, TrendViews([], {"A->B": p95}, {"flow": 1}, {"p95 lag": {"flow": 1}}), 10)
    assert again is not None
    assert "1 flow (p95 lag)" in again and "growing: p95 lag" in again
    assert "growing: time out of sync" not in again.split('<section id="trends">')[0]
