"""A claim the evidence cannot prove is flagged, never IN_SYNC (docs/design.md §3, issue 30 case 2): where
the probe needed to date record LRO + 1 did not answer (no Read ACL, its per-poll bound, a
timeout, data deleted), the time lag is a lower bound counted from the first look, flagged, and
the state is judged on it. The engine against hand-made polls; the oracle is held equal by
test_engine_vs_oracle."""

from __future__ import annotations

from mirrorlag.config.settings import EngineParams
from mirrorlag.model import PartitionKey, PartitionRow, PollObservation, State
from tests.oracle.lag_engine import LagEngine as Oracle
from tests.unit.test_engine import K0, READ, engine, lro

MAX = 30.0  # replication.lag.time.max.ms, the default


def poll(eng, t: float, leo: int, offset: int, changed_at: float, *, probed: dict | None = None,
         unprobed: bool = False, key: PartitionKey = K0) -> PartitionRow:
    obs = PollObservation(t, t + READ, {key: leo}, {key: lro(offset, changed_at)}, oldest_uncopied=probed or {},
                          unprobed=frozenset({key}) if unprobed else frozenset())
    return eng.update(obs).by_key()[key]


def both():
    """The engine and the oracle, each walked through the same polls."""
    return engine(), Oracle(lambda flow: EngineParams())


def test_first_look_behind_without_the_probe_is_unknown_then_out_of_sync_on_the_bound() -> None:
    # A mirror stalled before the sidecar started (LRO 999, LEO 2000); the probe is refused.
    for e in both():
        r = poll(e, 0.0, 2_000, 999, -3_600.0, unprobed=True)
        assert (r.state, r.record_lag, r.time_lag_lower_bound) == (State.UNKNOWN, 1_000, True), r
        assert r.time_lag_s == READ  # counted from the first look: a lower bound
        r = poll(e, 15.0, 2_000, 999, -3_600.0, unprobed=True)
        assert (r.state, r.time_lag_lower_bound) == (State.UNKNOWN, True)
        r = poll(e, 30.0, 2_000, 999, -3_600.0, unprobed=True)  # the bound passes max: judged on it
        assert (r.state, r.time_lag_lower_bound) == (State.STALLED, True)
        assert r.time_lag_s == 30.0 + READ


def test_a_probed_append_time_proves_it() -> None:
    for e in both():
        r = poll(e, 0.0, 2_000, 999, -3_600.0, unprobed=True)
        assert r.state is State.UNKNOWN
        r = poll(e, 15.0, 2_000, 999, -3_600.0, probed={K0: -3_600.0})  # answered at last
        assert (r.state, r.time_lag_lower_bound) == (State.STALLED, False)
        assert r.time_lag_s == 15.0 + READ + 3_600.0
        r = poll(e, 30.0, 2_000, 999, -3_600.0, unprobed=True)  # not answered again: still proved
        assert (r.state, r.time_lag_lower_bound) == (State.STALLED, False)


def test_an_idle_transactional_partition_whose_probe_cannot_answer_stays_behind_flagged() -> None:
    # LRO 100, its commit marker at 101, LEO 102: only the probe can tell the marker from data.
    for e in both():
        states = []
        for t in (0.0, 15.0, 30.0, 45.0):
            r = poll(e, t, 102, 100, -600.0, unprobed=True)
            assert (r.record_lag, r.time_lag_lower_bound) == (1, True), r
            states.append(r.state)
        assert states == [State.UNKNOWN, State.UNKNOWN, State.STALLED, State.STALLED]
        # Once the probe answers (no data left: only the marker), caught up and proved.
        r = poll(e, 60.0, 102, 100, -600.0, probed={K0: None})
        assert (r.state, r.record_lag, r.time_lag_lower_bound) == (State.IN_SYNC, 0, False)


def test_a_credited_catch_up_proves_it_without_the_probe() -> None:
    # A busy mirror: its first look is behind and unprobed, then it copies all that existed at the
    # previous poll: caught up is credited to that poll, and the time lag is proved.
    for e in both():
        r = poll(e, 0.0, 1_000, 990, -1.0, unprobed=True)
        assert r.state is State.UNKNOWN
        r = poll(e, 15.0, 1_100, 1_090, 14.0)
        assert (r.state, r.time_lag_lower_bound, r.time_lag_s) == (State.IN_SYNC, False, 15.0 + READ)


def test_without_an_unanswered_probe_nothing_is_flagged() -> None:
    # The engine alone (no probe asked, as in the tests before issue 30): the first look's rule
    # as before.
    for e in both():
        r = poll(e, 0.0, 2_000, 999, -3_600.0)
        assert (r.state, r.time_lag_lower_bound) == (State.IN_SYNC, False)
