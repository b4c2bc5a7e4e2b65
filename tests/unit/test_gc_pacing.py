"""GcPacing: no automatic collection inside a poll, a freeze after it, a full collection per period,
and no cycle kept past it."""

from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from mirrorlag.process.gc_pacing import GcPacing


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.collect()


class FullCollections:
    """Counts full collections (gc.collect() with no generation) while it is installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        collect = gc.collect

        def counting(*args: int, **kwargs: int) -> int:
            self.count += not args and not kwargs
            return collect(*args, **kwargs)

        monkeypatch.setattr(gc, "collect", counting)


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> FullCollections:
    return FullCollections(monkeypatch)


def test_the_first_poll_collects_in_full_then_once_per_period(full: FullCollections) -> None:
    pacing = GcPacing(full_every_s=100)
    assert pacing.due(5.0)
    pacing.after_poll(5.0)
    assert (full.count, pacing.due(104.9), pacing.due(105.0)) == (1, False, True)
    pacing.after_poll(50.0)
    assert full.count == 1
    pacing.after_poll(105.0)
    assert (full.count, pacing.last_full_at) == (2, 105.0)


def test_what_lives_through_a_poll_is_frozen_out_of_the_collectors_sight() -> None:
    pacing = GcPacing(full_every_s=100)
    pacing.after_poll(0.0)
    kept = [Node() for _ in range(1000)]
    pacing.after_poll(1.0)
    assert gc.get_freeze_count() >= len(kept)


def test_the_collector_is_off_during_a_poll_and_back_on_after_the_freeze() -> None:
    pacing = GcPacing(full_every_s=100)
    pacing.after_poll(0.0)
    with pacing.around_poll(clock=lambda: 1.0):
        assert not gc.isenabled()
        kept = [Node() for _ in range(5000)]  # far past the young threshold: no collection ran
        assert gc.get_count()[0] >= len(kept)
    assert gc.isenabled()
    # (That the collector comes back on only after the freeze is pinned in test_malloc.)
    assert gc.get_freeze_count() >= len(kept)


def test_a_failed_poll_still_freezes_and_re_enables(full: FullCollections) -> None:
    pacing = GcPacing(full_every_s=100)
    with pytest.raises(RuntimeError), pacing.around_poll(clock=lambda: 0.0):
        raise RuntimeError("source down")
    assert gc.isenabled() and full.count == 1


def test_a_collector_switched_off_by_the_host_stays_off() -> None:
    gc.disable()
    try:
        with GcPacing().around_poll():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_cycle_made_and_dropped_within_a_poll_waits_for_the_next_full_collection() -> None:
    pacing = GcPacing(full_every_s=100)
    pacing.after_poll(0.0)
    with pacing.around_poll(clock=lambda: 1.0):
        node = weakref.ref(Node())
    assert node() is not None, "no collection between polls: frozen with the rest"
    with pacing.around_poll(clock=lambda: 100.0):
        pass
    assert node() is None


def test_a_cycle_that_dies_while_frozen_is_freed_by_the_next_full_collection() -> None:
    pacing = GcPacing(full_every_s=100)
    pacing.after_poll(0.0)
    alive = Node()
    pacing.after_poll(1.0)  # frozen while alive
    ref = weakref.ref(alive)
    del alive
    pacing.after_poll(2.0)
    assert ref() is not None, "frozen: no young or old collection sees it"
    pacing.after_poll(100.0)
    assert ref() is None
