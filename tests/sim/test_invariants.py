"""Property tests: hypothesis-generated schedules through the reference simulation (model.py),
the real LroCache and the real LagEngine, checked against ground truth (docs/design.md §3).

Notation (per partition). Polls k = 0, 1, ... at t_k = start + kΔ; the LEO snapshot L_k = LEO(t_k)
is taken first, the LRO R_k = LRO(now_k) is read at now_k = t_k + eps (0 < eps < Δ). a[o] is the
append time of offset o. TOL absorbs float rounding only (1e-6 s); no bound below is "roughly".

The invariants and their exact bounds
-------------------------------------
record lag   row.record_lag == max(0, L_k - (R_k + 1)) (hence >= 0), and it is 0 exactly when
             R_k + 1 >= L_k ("caught up at the snapshot"); time lag (and freshness) are 0
             exactly then too.

time lag     The engine keeps last_caught_up (lcu) as docs/design.md §3 says. Two truths bracket it:

  C_k = a[R_k + 1] when R_k + 1 < L_k: the latest instant x such that every record that existed
        at x has been copied by now_k ("the mirror has everything up to C_k", the copied-prefix
        truth, which is also the freshness truth).
  H_k = the last instant at or before now_k at which the mirror lacked no record at all
        (LRO(x) + 1 >= LEO(x)): the literal "last time the mirror had every record".

  (TL1)  time_lag >= now_k - C_k                     (the engine never understates)
         Proof: lcu only ever becomes some t_j with L_j <= R_i + 1 for an i <= k; the LRO does
         not step back, so L_j <= R_k + 1, i.e. offset R_k + 1 did not exist at t_j: t_j < C_k.
         (After a rewind the same holds with R_k replaced by the highest LRO so far.)
  (TL2)  time_lag <= now_k - H_k + Δ                  (it overstates by at most one interval)
         Proof: if H_k > t_k the mirror had, at some x in (t_k, now_k], every record of the
         snapshot, so R_k + 1 >= L_k and the engine says 0. Otherwise H_k lies in (t_i, t_{i+1}]
         for some i + 1 <= k, and the mirror had every record at some x in (t_i, H_k]; at poll
         i+1 the LRO (read at now_{i+1} > x, and it never steps back) covers LEO(x) >= L_i, so
         the engine set lcu >= t_i >= H_k - Δ, and lcu never decreases.
  Both need the engine to have seen the partition caught up once (before that it reports the
  documented lower bound "time since first seen"); TL2 needs an LRO that never steps back.

  So 0 <= time_lag - (now - C) and time_lag - (now - H) <= Δ. Where the two truths agree (C = H:
  the mirror was caught up when the oldest record it still lacks arrived: a burst, a stall, a
  slow-down from caught up) this is exactly  0 <= engine - truth <= Δ. They differ when the
  mirror has trailed continuously (never quite caught up) since before that record: the KIP-16
  rule then reports "time since the mirror was last within one snapshot of the end", which is
  between the two and can differ from either by more than Δ: neither |engine - C| <= Δ nor
  |engine - H| <= Δ is a theorem, so neither is asserted.

no flapping  From TL2: at any poll where (now - H) + Δ <= replication.lag.time.max the state is
             IN_SYNC. So a burst the mirror copies within max - Δ never flaps the state.
             Promised for bursts copied within max, it would be false for the rule of
             docs/design.md §3 itself (TL2 is tight): see test_burst_copied_within_max_never_flaps.

STALLED      (ST1) with T = max(a[R + 1], changed_at of the LRO reading): every poll with
             now > T + max is STALLED, until the LRO moves (so it is reached within max + Δ
             of T). (ST2) with the true moment the LRO last moved, c: every poll with
             now > max(a[R + 1], c) + max + Δ is STALLED (the sidecar sees a change up to Δ late).
             (ST3) STALLED implies record lag > 0, the LRO unmoved for >= min(ttl, max), and
             now - H > max - Δ. (ST4) STALLED stays STALLED while the LRO reading is unchanged.

freshness    Inside the table (freshness_lower_bound False): |freshness - (now - a[R+1])| <= Δ:
             the two table points bracketing R + 1 are consecutive polls (or the end of a flat
             stretch and the next poll), so both the interpolated and the true append time lie
             in the same (t_{i-1}, t_i]. Flagged a lower bound: freshness <= now - a[R+1].
             Not flagged whenever the record arrived after the first poll and no point can have
             been dropped yet (polls so far <= freshness_points).

retention    log_start is the last value read; retention_headroom_records == max(0, R+1 - S);
             the row's records_lost + records_lost_unverified (no probe here: none is proved data,
             all are unverified) lies between the deleted-uncopied range the engine can see,
             max(0, S - (R+1)), and the true number of offsets deleted before being copied; the
             engine's per-flow counter lies between the losses a poller can prove (the union over
             polls of [R_j + 1, S_j)) and the truth: so it is exact whenever every loss was
             visible at a poll (test_records_lost_exact_when_observable constructs such runs).
             AT_RISK whenever proved-lost records are visible, and before the loss when the
             log start closes in on a stalled mirror at a known rate (derivation at the test).
             A log retention emptied (S >= LEO) is caught up, record lag 0, whatever the LRO:
             nothing is left to copy; what it deleted uncopied is still counted as above.

rates        never negative; exactly 0 once nothing was appended / copied for 2W + 3Δ, where
             W = num_samples x sample_window (like Kafka's Rate, the estimator's span runs from
             W/2 up to W plus one poll gap; test_scenarios pins the copy rate over one window);
             catch_up_s == record_lag / (copy_rate - append_rate) when the mirror gains, None
             when it does not gain (0 or None when caught up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorlag.config.settings import EngineParams
from mirrorlag.model import State

from tests.sim.model import (
    FILLED,
    FLOW,
    Appends,
    Burst,
    Mirror,
    Phase,
    Retention,
    Run,
    SimPartition,
    SourceLog,
    key,
    run,
)

TOL = 1e-6
OUT_OF_SYNC = (State.LAGGING, State.STALLED)

QUICK = settings(
    max_examples=50,
    deadline=None,
    database=None,  # write nothing outside tests/sim
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)
SOAK = settings(QUICK, max_examples=1000)


def needs(*fields: str) -> pytest.MarkDecorator:
    """xfail while the engine does not fill a field yet (probed once at import, model.FILLED)."""
    missing = [f for f in fields if not FILLED.get(f)]
    return pytest.mark.xfail(
        bool(missing), reason=f"engine does not fill {', '.join(missing)} yet", strict=False
    )


def require(*fields: str) -> None:
    """Inside a `needs` test: stop at once (xfail) rather than let hypothesis shrink a failure
    that every example would have."""
    missing = [f for f in fields if not FILLED.get(f)]
    if missing:
        pytest.xfail(f"engine does not fill {', '.join(missing)} yet")


# --------------------------------------------------------------------------------------------
# Cases and strategies
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartSpec:
    initial: int
    appends: tuple[Appends, ...]
    bursts: tuple[Burst, ...]
    phases: tuple[Phase, ...]
    latency: float = 0.0
    retention: Retention | None = None
    initial_rate: float = 1.0


@dataclass(frozen=True)
class Case:
    parts: tuple[PartSpec, ...]
    interval: float
    eps: float
    end: float
    params: EngineParams
    ttl: float = 20.0
    log_start_every: int = 1

    @property
    def rewinds(self) -> bool:
        return any(ph.rewind for p in self.parts for ph in p.phases)

    @property
    def retention(self) -> bool:
        return any(p.retention is not None for p in self.parts)


def simulate(case: Case) -> Run:
    sims = []
    for i, spec in enumerate(case.parts):
        log = SourceLog(spec.appends, spec.bursts, initial=spec.initial, initial_rate=spec.initial_rate,
                        retention=spec.retention)
        mirror = Mirror(log, spec.phases, latency=spec.latency, horizon=case.end + case.interval)
        sims.append(SimPartition(key(i), log, mirror))
    return run(sims, interval=case.interval, end=case.end, eps=case.eps, params=case.params,
               ttl=case.ttl, log_start_every=case.log_start_every)


def quarter(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Multiples of 0.25 s: poll times then often coincide with append times, an edge worth hitting."""
    return st.integers(round(lo * 4), round(hi * 4)).map(lambda q: q / 4)


def floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


rates = st.one_of(st.just(0.0), floats(0.2, 10.0))
speeds = st.one_of(st.just(0.0), floats(1.0, 200.0))


@st.composite
def engine_params(draw: st.DrawFn, interval: float) -> EngineParams:
    return EngineParams(
        lag_time_max_s=draw(floats(max(5.0, interval), 60.0)),
        sample_window_s=draw(floats(5.0, 60.0)),
        num_samples=draw(st.integers(1, 3)),
        freshness_points=draw(st.integers(2, 60)),
        retention_warn_s=draw(floats(10.0, 600.0)),
    )


@st.composite
def part_specs(draw: st.DrawFn, end: float, *, rewinds: bool = False, retention: bool = False) -> PartSpec:
    appends = tuple(draw(st.lists(st.builds(Appends, floats(1.0, 120.0), rates), min_size=1, max_size=5)))
    bursts = tuple(draw(st.lists(st.builds(Burst, floats(0.0, end), st.integers(1, 300)), max_size=3)))
    rewind = st.one_of(st.just(0), st.just(0), st.integers(1, 500)) if rewinds else st.just(0)
    # With rewinds, slower mirrors: a step back re-copied between two polls is invisible to them.
    speed = st.one_of(st.just(0.0), floats(0.5, 30.0)) if rewinds else speeds
    phases = tuple(draw(st.lists(st.builds(Phase, floats(1.0, 150.0), speed, rewind), min_size=1, max_size=6)))
    latency = draw(st.one_of(st.just(0.0), floats(0.0, 5.0)))
    ret = None
    if retention:
        ret = draw(st.builds(
            Retention,
            keep_records=st.one_of(st.none(), st.integers(1, 400)),
            keep_seconds=st.one_of(st.none(), floats(5.0, 200.0)),
            check_interval=st.one_of(st.none(), floats(1.0, 60.0)),
        ))
    return PartSpec(draw(st.integers(1, 40)), appends, bursts, phases, latency, ret)


@st.composite
def cases(draw: st.DrawFn, *, rewinds: bool = False, retention: bool = False, max_end: float = 300.0) -> Case:
    interval = draw(quarter(1.0, 15.0))
    end = draw(floats(30.0, max_end))
    parts = tuple(draw(st.lists(part_specs(end, rewinds=rewinds, retention=retention), min_size=1, max_size=3)))
    return Case(
        parts=parts,
        interval=interval,
        eps=draw(floats(0.001, min(0.5, interval / 4))),
        end=end,
        params=draw(engine_params(interval)),
        ttl=draw(floats(2.0, 60.0)),
        log_start_every=draw(st.integers(1, 4)),
    )


@st.composite
def stall_cases(draw: st.DrawFn) -> Case:
    """A mirror that runs, stalls for longer than max + 3Δ while the source keeps appending,
    then (maybe) resumes: STALLED must come, stay, and go."""
    interval = draw(quarter(1.0, 15.0))
    params = draw(engine_params(interval))
    mx = params.lag_time_max_s
    run1 = draw(floats(0.0, 60.0))
    run2 = draw(floats(1.0, 60.0))
    parts = []
    end = 0.0
    for _ in range(draw(st.integers(1, 2))):
        r = draw(floats(0.2, 10.0))
        # Long enough for a record to arrive (every 1/r s) and then wait more than max + 3Δ.
        stall = draw(floats(mx + 3 * interval + 2 / r, mx + 6 * interval + 60.0))
        end = max(end, run1 + stall + run2)
        appends = (Appends(run1 + stall + run2 + interval, r),)
        if draw(st.booleans()):  # an idle stretch inside the stall: lag stays, nothing new arrives
            cut = draw(floats(run1 + 2 / r, run1 + stall))
            appends = (Appends(cut, r), Appends(draw(floats(1.0, 60.0)), 0.0), Appends(run1 + stall + run2, r))
        v = draw(floats(2 * r, 200.0))
        phases = (Phase(run1, v), Phase(stall, 0.0), Phase(run2, draw(floats(2 * r, 400.0))))
        parts.append(PartSpec(draw(st.integers(1, 40)), appends, (), phases, draw(floats(0.0, 2.0))))
    return Case(tuple(parts), interval, draw(floats(0.001, min(0.5, interval / 4))), end, params,
                ttl=draw(floats(2.0, 60.0)), log_start_every=draw(st.integers(1, 4)))


# --------------------------------------------------------------------------------------------
# The checks (each takes a finished run)
# --------------------------------------------------------------------------------------------


def check_record_and_time_lag(res: Run, *, rewinds: bool, retention: bool) -> None:
    delta = res.interval
    mx = res.params.lag_time_max_s
    allowed = {State.IN_SYNC, State.LAGGING, State.STALLED}
    if rewinds:
        allowed.add(State.REWIND)
    if retention:
        allowed.add(State.AT_RISK)
    for sp in res.partitions:
        k = sp.key
        initialized = False
        for p, row, tr in res.series(k):
            where = f"{k} poll {p.k} t={p.t} now={p.now}: {row}\ntruth {tr}"
            assert row.leo == tr.leo and row.lro == tr.lro, where
            assert row.state in allowed, where
            # record lag against the snapshot, 0 exactly when caught up
            assert row.record_lag == tr.record_lag, where
            assert row.record_lag >= 0, where
            assert (row.record_lag == 0) == tr.caught_up, where
            assert row.time_lag_s is not None and math.isfinite(row.time_lag_s) and row.time_lag_s >= 0, where
            assert (row.time_lag_s == 0.0) == tr.caught_up, where
            assert row.record_lag_min <= row.record_lag <= row.record_lag_max, where
            assert row.record_lag_min <= row.record_lag_avg + TOL and row.record_lag_avg <= row.record_lag_max + TOL, where
            # the state is what the time lag says (REWIND and AT_RISK aside)
            if row.state in OUT_OF_SYNC:
                assert row.time_lag_s > mx, where
            elif row.state is State.IN_SYNC:
                assert row.time_lag_s <= mx, where
            initialized = initialized or tr.caught_up
            if not initialized:
                continue  # before the first caught-up poll the engine reports a documented lower bound
            # TL1: never understates (the copied-prefix truth, with the highest LRO after a rewind)
            if tr.copied_through is not None:
                assert row.time_lag_s >= p.now - tr.copied_through - TOL, where
            if rewinds:
                continue
            # TL2: overstates by at most one interval (the literal "had every record" truth)
            if tr.busy_since is None:
                assert row.time_lag_s == 0.0, where
            else:
                assert row.time_lag_s <= p.now - tr.busy_since + delta + TOL, where
                # where the truths agree, the brief's |error| <= one interval, one-sided as proven
                if tr.copied_through is not None and tr.copied_through == tr.busy_since:
                    err = row.time_lag_s - (p.now - tr.copied_through)
                    assert -TOL <= err <= delta + TOL, where
                # no flapping: within max - Δ of the truth the state is IN_SYNC
                if p.now - tr.busy_since + delta <= mx and row.state is not State.AT_RISK:
                    assert row.state is State.IN_SYNC, where


def check_stalled(res: Run, *, retention: bool) -> int:
    """ST1-ST4 (no rewinds). Returns how many polls ST1 or ST2 forced to STALLED."""
    delta = res.interval
    mx = res.params.lag_time_max_s
    first_now = res.polls[0].now
    stalled_like = {State.STALLED, State.AT_RISK} if retention else {State.STALLED}
    forced = 0
    for sp in res.partitions:
        k = sp.key
        initialized = False
        prev = None
        for p, row, tr in res.series(k):
            where = f"{k} poll {p.k} t={p.t} now={p.now}: {row}\ntruth {tr}"
            initialized = initialized or tr.caught_up
            if row.state is State.STALLED:
                # ST3: soundness
                assert row.record_lag > 0, where
                assert p.now - tr.lro_since >= min(res.ttl, mx) - TOL, where
                if initialized and tr.busy_since is not None:
                    assert p.now - tr.busy_since > mx - delta - TOL, where
            # (retention emptying the log ends a stall too: nothing is left to copy)
            emptied = tr.log_start_known is not None and tr.log_start_known >= tr.leo
            if prev is not None and prev[0].state is State.STALLED and prev[1].lro == tr.lro and not emptied:
                assert row.state in stalled_like, f"ST4: left STALLED without the LRO moving\n{where}"
            prev = (row, tr)
            if not initialized or tr.oldest_uncopied_at is None:
                continue
            # ST1: from what the sidecar saw (the reading's changed_at, a poll that found the log emptied)
            if p.now > max(tr.oldest_uncopied_at, tr.lro_seen_at, tr.emptied_at) + mx + TOL:
                forced += 1
                assert row.state in stalled_like, f"ST1\n{where}"
            # ST2: from the truth (the LRO last moved at lro_since, after the first poll)
            if tr.lro_since > first_now and p.now > max(tr.oldest_uncopied_at, tr.lro_since, tr.emptied_at) + mx + delta + TOL:
                forced += 1
                assert row.state in stalled_like, f"ST2\n{where}"
    return forced


def check_rewinds(res: Run) -> None:
    """REWIND exactly when the LRO is below the highest LRO of an earlier poll (and the partition is
    in sync); the counter counts the step-backs the polls saw."""
    mx = res.params.lag_time_max_s
    total = 0
    for sp in res.partitions:
        k = sp.key
        best: int | None = None
        last = None
        for p, row, tr in res.series(k):
            where = f"{k} poll {p.k}: {row}\ntruth {tr}"
            below = best is not None and tr.lro < best
            if row.time_lag_s <= mx and row.state is not State.AT_RISK:
                assert (row.state is State.REWIND) == below, where
            elif row.state is State.REWIND:
                raise AssertionError(f"REWIND while out of sync\n{where}")
            best = tr.lro if best is None else max(best, tr.lro)
            last = tr
        total += last.rewinds_seen
    assert res.engine.rewinds_total.get(FLOW, 0) == total


def check_freshness(res: Run) -> None:
    delta = res.interval
    points = max(2, res.params.freshness_points)
    t0 = res.polls[0].t
    for sp in res.partitions:
        for p, row, tr in res.series(sp.key):
            where = f"{sp.key} poll {p.k} t={p.t} now={p.now}: {row}\ntruth {tr}"
            f = row.freshness_lag_s
            assert f is not None and math.isfinite(f) and f >= 0, where
            assert (f == 0.0) == (row.record_lag == 0), where
            if row.freshness_lower_bound:
                assert f <= tr.freshness + TOL, where
                # Inside the table it is exact, unless the LRO stepped back below what the table
                # kept: it drops the points older than the best LRO's next record; or retention
                # emptied the log since record LRO + 1 was appended: caught up then (nothing to
                # copy), the table starts again there, and that deleted record is older than it.
                rewound = tr.lro_max is not None and row.lro is not None and row.lro < tr.lro_max
                emptied = tr.emptied_at >= tr.oldest_uncopied_at
                assert rewound or emptied or not (tr.polls <= points and tr.oldest_uncopied_at > t0), \
                    f"flagged inside the table\n{where}"
            else:
                assert abs(f - tr.freshness) <= delta + TOL, where


def check_rates(res: Run) -> None:
    delta = res.interval
    span = 2 * (res.params.sample_window_s * res.params.num_samples + delta) + delta
    t0 = res.polls[0].t
    for sp in res.partitions:
        for p, row, tr in res.series(sp.key):
            where = f"{sp.key} poll {p.k} t={p.t} now={p.now}: {row}\ntruth {tr}"
            for name in ("append_rate", "copy_rate"):
                v = getattr(row, name)
                assert v is None or (math.isfinite(v) and v >= 0), f"{name}\n{where}"
            # forgetting: nothing appended in (t - span, t] (and polled all that time): exactly 0
            if p.t - span >= t0 and sp.log.leo(p.t) == sp.log.leo(p.t - span) and p.k >= 1:
                assert row.append_rate == 0.0, f"append_rate\n{where}"
            if tr.lro_seen_at is not None and tr.lro_seen_at <= p.now - span:
                assert row.copy_rate == 0.0, f"copy_rate\n{where}"
            # catch-up estimate
            c = row.catch_up_s
            if row.record_lag == 0:
                assert c in (None, 0.0), where
            elif c is not None:
                assert row.copy_rate is not None and row.append_rate is not None, where
                assert row.copy_rate > row.append_rate, where
                assert math.isclose(c, row.record_lag / (row.copy_rate - row.append_rate), rel_tol=1e-9), where
            elif row.copy_rate is not None and row.append_rate is not None:
                assert not row.copy_rate > row.append_rate, f"gaining but no catch-up estimate\n{where}"


def check_retention(res: Run) -> None:
    lost_total = getattr(res.engine, "records_lost_total", None)
    for i, p in enumerate(res.polls):
        certain = truth = 0
        for sp in res.partitions:
            row, tr = p.rows[sp.key], p.truth[sp.key]
            where = f"{sp.key} poll {p.k} t={p.t}: {row}\ntruth {tr}"
            certain += tr.lost_certain
            truth += tr.lost
            assert row.log_start == tr.log_start_known, where
            if tr.log_start_known is None:
                continue
            assert row.retention_headroom_records == max(0, tr.lro + 1 - tr.log_start_known), where
            assert row.records_lost is not None, where
            # Lost means data: without the probe no deleted offset is proved data, so every one
            # the engine can see is unverified; never hidden.
            assert row.records_lost_unverified is not None, where
            assert tr.lost_visible <= row.records_lost + row.records_lost_unverified <= tr.lost, where
            if row.records_lost > 0:
                assert row.state is State.AT_RISK, where
                assert row.retention_headroom_s == 0.0, where
            hs = row.retention_headroom_s
            assert hs is None or (math.isfinite(hs) and hs >= 0), where
            if row.record_lag == 0 and tr.lro + 1 >= tr.log_start_known:
                # caught up, the log start at or behind LRO + 1: retention deleted only copied records
                assert row.state is not State.AT_RISK and not row.records_lost and hs is None, where
                assert not row.records_lost_unverified, where
            elif row.record_lag == 0:  # an emptied log: caught up, and what it deleted uncopied is counted
                assert tr.log_start_known >= tr.leo, where
                assert (row.state is State.AT_RISK) == (row.records_lost > 0), where
        if isinstance(lost_total, dict) and i == len(res.polls) - 1:
            counted = lost_total.get(FLOW, 0) + getattr(res.engine, "records_lost_unverified_total", {}).get(FLOW, 0)
            assert certain <= counted <= truth, f"records_lost_total={counted} certain={certain} truth={truth}"


# --------------------------------------------------------------------------------------------
# Properties (each a quick and a soak variant)
# --------------------------------------------------------------------------------------------


def _core(case: Case) -> None:
    res = simulate(case)
    check_record_and_time_lag(res, rewinds=False, retention=False)
    check_stalled(res, retention=False)
    for p in res.polls:  # no retention: never AT_RISK, nothing lost, no headroom forecast
        for row in p.rows.values():
            assert row.state is not State.AT_RISK and not row.records_lost, row
            assert row.retention_headroom_s is None, row


def _stall(case: Case) -> None:
    res = simulate(case)
    check_record_and_time_lag(res, rewinds=False, retention=False)
    forced = check_stalled(res, retention=False)
    assert forced > 0, "the stall schedule never forced STALLED: strategy bug"


def _rewind(case: Case) -> None:
    res = simulate(case)
    check_record_and_time_lag(res, rewinds=True, retention=False)
    check_rewinds(res)


def _freshness(case: Case) -> None:
    check_freshness(simulate(case))


def _rates(case: Case) -> None:
    check_rates(simulate(case))


def _retention(case: Case) -> None:
    res = simulate(case)
    check_record_and_time_lag(res, rewinds=False, retention=True)
    check_stalled(res, retention=True)
    check_retention(res)


core_quick = QUICK(given(cases())(_core))
core_soak = SOAK(given(cases(max_end=900.0))(_core))
stall_quick = QUICK(given(stall_cases())(_stall))
stall_soak = SOAK(given(stall_cases())(_stall))
rewind_quick = QUICK(given(cases(rewinds=True))(_rewind))
rewind_soak = SOAK(given(cases(rewinds=True, max_end=900.0))(_rewind))
freshness_cases = st.one_of(cases(), cases(rewinds=True), cases(retention=True), stall_cases())
freshness_quick = QUICK(given(freshness_cases)(_freshness))
freshness_soak = SOAK(given(freshness_cases)(_freshness))
rates_cases = st.one_of(cases(), stall_cases(), cases(retention=True))
rates_quick = QUICK(given(rates_cases)(_rates))
rates_soak = SOAK(given(rates_cases)(_rates))
retention_quick = QUICK(given(cases(retention=True))(_retention))
retention_soak = SOAK(given(cases(retention=True, max_end=900.0))(_retention))


def test_record_lag_time_lag_and_states() -> None:
    core_quick()


def test_stalled_comes_stays_and_goes() -> None:
    stall_quick()


def test_rewinds() -> None:
    rewind_quick()


@needs("freshness_lag_s")
def test_freshness_within_one_interval() -> None:
    require("freshness_lag_s")
    freshness_quick()


@needs("append_rate", "copy_rate", "catch_up_s")
def test_rates() -> None:
    require("append_rate", "copy_rate", "catch_up_s")
    rates_quick()


@needs("log_start", "retention_headroom_records", "records_lost")
def test_retention_headroom_and_loss_bounds() -> None:
    require("log_start", "retention_headroom_records", "records_lost")
    retention_quick()


@pytest.mark.soak
def test_record_lag_time_lag_and_states_soak() -> None:
    core_soak()


@pytest.mark.soak
def test_stalled_soak() -> None:
    stall_soak()


@pytest.mark.soak
def test_rewinds_soak() -> None:
    rewind_soak()


@pytest.mark.soak
@needs("freshness_lag_s")
def test_freshness_soak() -> None:
    require("freshness_lag_s")
    freshness_soak()


@pytest.mark.soak
@needs("append_rate", "copy_rate", "catch_up_s")
def test_rates_soak() -> None:
    require("append_rate", "copy_rate", "catch_up_s")
    rates_soak()


@pytest.mark.soak
@needs("log_start", "retention_headroom_records", "records_lost")
def test_retention_soak() -> None:
    require("log_start", "retention_headroom_records", "records_lost")
    retention_soak()


# --------------------------------------------------------------------------------------------
# Bursts: no flapping
# --------------------------------------------------------------------------------------------


@st.composite
def burst_setups(draw: st.DrawFn) -> tuple[Case, list[SimPartition], float]:
    """Background traffic (or none), bursts, a mirror that always runs. Returns the case (its
    lag_time_max_s to be chosen), the simulated partitions, and X: the longest time the mirror
    lacked some record (the longest burst copy, from its first record's append to the moment the
    mirror had everything) up to the last poll."""
    interval = draw(quarter(1.0, 15.0))
    eps = draw(floats(0.001, min(0.5, interval / 4)))
    end = draw(floats(60.0, 300.0))
    specs = []
    for _ in range(draw(st.integers(1, 3))):
        bg = draw(st.one_of(st.just(0.0), floats(0.2, 5.0)))
        bursts = tuple(draw(st.lists(st.builds(Burst, floats(1.0, end), st.integers(1, 2000)), min_size=1, max_size=4)))
        speed = draw(floats(max(4 * bg, 20.0), 500.0))
        latency = draw(st.one_of(st.just(0.0), floats(0.0, 3.0)))
        specs.append(PartSpec(draw(st.integers(1, 40)), (Appends(end + interval, bg),), bursts,
                              (Phase(end + 2 * interval, speed),), latency))
    case = Case(tuple(specs), interval, eps, end, draw(engine_params(interval)), ttl=draw(floats(2.0, 60.0)))
    sims = []
    longest = 0.0
    horizon = end + eps
    for i, spec in enumerate(specs):
        log = SourceLog(spec.appends, spec.bursts, initial=spec.initial)
        mirror = Mirror(log, spec.phases, latency=spec.latency, horizon=end + interval)
        for o in range(log.initial, log.leo(horizon)):
            longest = max(longest, min(mirror.passed[o], horizon) - mirror.busy_start[o])
        sims.append(SimPartition(key(i), log, mirror))
    return case, sims, longest


def _bursts(setup: tuple[Case, list[SimPartition], float], data: st.DataObject) -> None:
    case, sims, longest = setup
    delta = case.interval
    # What TL2 proves and docs/design.md §3 promises: copied within max - Δ never flaps.
    mx = data.draw(floats(longest + delta, longest + delta + 30.0), label="lag_time_max_s")
    params = EngineParams(**{**case.params.__dict__, "lag_time_max_s": mx})
    res = run(sims, interval=delta, end=case.end, eps=case.eps, params=params, ttl=case.ttl)
    for sp in sims:
        assert res.polls[0].truth[sp.key].caught_up
        flaps = [(p.t, row.state.value, row.time_lag_s) for p, row, _ in res.series(sp.key) if row.state is not State.IN_SYNC]
        assert not flaps, (
            f"{sp.key}: every burst was copied within {longest:.3f} s (max {mx:.3f} s, interval {delta} s), "
            f"yet the state left IN_SYNC at (t, state, time lag) {flaps[:5]}\n" + res.table(sp.key)
        )


bursts_quick = QUICK(given(burst_setups(), st.data())(lambda setup, data: _bursts(setup, data)))
bursts_soak = SOAK(given(burst_setups(), st.data())(lambda setup, data: _bursts(setup, data)))

def test_burst_copied_within_max_minus_one_interval_never_flaps() -> None:
    bursts_quick()




@pytest.mark.soak
def test_burst_no_flap_soak() -> None:
    bursts_soak()


# --------------------------------------------------------------------------------------------
# Retention: exact loss when every loss is observable, AT_RISK before loss
# --------------------------------------------------------------------------------------------


@st.composite
def observable_loss_cases(draw: st.DrawFn) -> Case:
    """Retention by record count (optionally applied at check intervals) overtakes a stalled
    mirror; the source stops appending, the log start settles, at least one log-start read sees
    the settled value, and only then does the mirror resume (skipping to the log start). Every
    lost offset was then visible at a poll as [LRO + 1, log start), so a correct engine counts
    exactly the truth."""
    interval = draw(quarter(1.0, 10.0))
    every = draw(st.integers(1, 3))
    specs = []
    resume_max = 0.0
    for _ in range(draw(st.integers(1, 2))):
        r = draw(floats(1.0, 10.0))
        stop = draw(floats(40.0, 150.0))
        check = draw(st.one_of(st.none(), floats(1.0, 30.0)))
        stall_at = draw(floats(5.0, stop))
        resume = stop + (check or 0.0) + (every + 1) * interval + draw(floats(0.0, 60.0))
        resume_max = max(resume_max, resume)
        phases = (
            Phase(stall_at, draw(floats(1.5 * r + 1.0, 100.0))),
            Phase(resume - stall_at, 0.0),
            Phase(400.0, draw(floats(50.0, 500.0))),
        )
        retention = Retention(keep_records=draw(st.integers(10, 400)), check_interval=check)
        specs.append(PartSpec(draw(st.integers(1, 40)), (Appends(stop, r),), (), phases, 0.0, retention))
    return Case(tuple(specs), interval, draw(floats(0.001, min(0.5, interval / 4))), resume_max + 60.0,
                draw(engine_params(interval)), ttl=draw(floats(2.0, 60.0)), log_start_every=every)


def _lost_exact(case: Case) -> None:
    res = simulate(case)
    check_retention(res)
    last = res.polls[-1]
    truth = sum(tr.lost for tr in last.truth.values())
    certain = sum(tr.lost_certain for tr in last.truth.values())
    assert certain == truth, "strategy bug: a loss was not observable"
    # No probe here: no deleted offset is proved data, so all of them are counted unverified.
    assert res.engine.records_lost_total.get(FLOW, 0) == 0
    assert res.engine.records_lost_unverified_total.get(FLOW, 0) == truth
    for sp in res.partitions:
        for p, row, tr in res.series(sp.key):
            # Before the mirror resumes, everything lost is still in view: the row says it all.
            if tr.lost_visible and tr.log_start_known == tr.log_start:
                assert row.records_lost_unverified == tr.lost, f"{sp.key} poll {p.k}: {row}\n{tr}"


lost_exact_quick = QUICK(given(observable_loss_cases())(_lost_exact))
lost_exact_soak = SOAK(given(observable_loss_cases())(_lost_exact))


@needs("records_lost", "records_lost_total")
def test_records_lost_exact_when_observable() -> None:
    require("records_lost", "records_lost_total")
    lost_exact_quick()


@pytest.mark.soak
@needs("records_lost", "records_lost_total")
def test_records_lost_exact_soak() -> None:
    require("records_lost", "records_lost_total")
    lost_exact_soak()


@st.composite
def closing_in_cases(draw: st.DrawFn) -> Case:
    """The log start advances at a known constant rate r (retention by count, steady appends at r
    since long before the first poll); the mirror keeps up, then stalls for good. Loss begins at
    tau = the deletion time of offset LRO + 1. N (records retained) is chosen so that the
    warning period is fully observable: see _at_risk."""
    interval = draw(quarter(1.0, 10.0))
    every = draw(st.integers(1, 3))
    ns = draw(st.integers(1, 2))
    w = draw(floats(5.0, 30.0))
    warn = draw(floats(max(40.0, 8 * interval), 200.0))
    params = EngineParams(lag_time_max_s=draw(floats(5.0, 60.0)), sample_window_s=w, num_samples=ns,
                          freshness_points=draw(st.integers(2, 60)), retention_warn_s=warn)
    r = draw(floats(1.0, 5.0))
    stall_at = draw(floats(10.0, 60.0))
    need = warn / 2 + every * interval + 2 * (ns * w + interval) + 4 * interval
    keep = math.ceil(r * (need + draw(floats(0.0, 60.0))))
    end = stall_at + keep / r + 4 * interval
    spec = PartSpec(keep + math.ceil(10 * r), (Appends(end + interval, r),), (),
                    (Phase(stall_at, draw(floats(3 * r, 100.0))), Phase(end, 0.0)), 0.0,
                    Retention(keep_records=keep), initial_rate=r)
    return Case((spec,), interval, draw(floats(0.001, min(0.5, interval / 4))), end, params,
                ttl=draw(floats(2.0, 60.0)), log_start_every=every)


def _at_risk(case: Case) -> None:
    """Derivation. Let R be the stalled LRO, T1 the first poll that read it, tau the moment the
    log start passes R + 1 (first loss), W the warn time, g = log_start_every * Δ (how stale the
    known log start can be). At a poll at t with t >= tau - W/2 + g:
      - the known log start S' is at most g old, so headroom R + 1 - S' <= r * W/2 + 1;
      - the copy rate over the windows is 0 once the stall is 2 * (window span + Δ) + Δ old
        (every copy has left both checkpoints of any windowed estimator);
      - the log-start rate is measured over >= 12 s of a steady advance of r >= 1/s, so it is
        within 2 records / 12 s of r, above r/2 + 1/W;
    so the forecast headroom_s = headroom / (rate - 0) < (r W/2 + 1) / (r/2 + 1/W) = W: AT_RISK,
    at every such poll strictly before tau. N was chosen so that at least one exists."""
    res = simulate(case)
    check_retention(res)
    sp = res.partitions[0]
    delta = res.interval
    p_ = res.params
    R = sp.mirror.event_v[-1]
    tau = sp.log.delete_times[R + 1]
    gap = case.log_start_every * delta
    warned = 0
    for p, row, tr in res.series(sp.key):
        if tr.lro != R or p.t >= tau:
            continue
        settled = tr.lro_seen_at + 2 * (p_.sample_window_s * p_.num_samples + delta) + delta
        if p.t >= tau - p_.retention_warn_s / 2 + gap and p.now >= settled:
            warned += 1
            assert row.state is State.AT_RISK, f"poll {p.k} t={p.t}, loss at {tau}: {row}\n" + res.table(
                sp.key, ("state", "record_lag", "log_start", "retention_headroom_records", "retention_headroom_s", "copy_rate"))
            assert row.retention_headroom_s is not None and row.retention_headroom_s < p_.retention_warn_s
    assert warned > 0, "strategy bug: no poll inside the warning period"
    assert any(p.rows[sp.key].state is State.AT_RISK and p.t < tau for p in res.polls)


at_risk_quick = QUICK(given(closing_in_cases())(_at_risk))
at_risk_soak = SOAK(given(closing_in_cases())(_at_risk))


@needs("retention_headroom_s", "records_lost")
def test_at_risk_before_loss() -> None:
    require("retention_headroom_s", "records_lost")
    at_risk_quick()


@pytest.mark.soak
@needs("retention_headroom_s", "records_lost")
def test_at_risk_before_loss_soak() -> None:
    require("retention_headroom_s", "records_lost")
    at_risk_soak()
