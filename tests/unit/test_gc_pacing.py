"""GcPacing: young collections every poll, a full one per period, and no cycle kept past it."""

from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from mirrorlag.gc_pacing import GcPacing


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.collect()


def test_the_first_poll_collects_in_full_then_once_per_period() -> None:
    pacing = GcPacing(full_every_s=100)
    assert pacing.due(5.0)
    pacing.after_poll(5.0)
    assert (pacing.full_collections, pacing.due(104.9), pacing.due(105.0)) == (1, False, True)
    pacing.after_poll(50.0)
    assert pacing.full_collections == 1
    pacing.after_poll(105.0)
    assert (pacing.full_collections, pacing.last_full_at) == (2, 105.0)


def test_what_lives_through_a_poll_is_frozen_out_of_the_collectors_sight() -> None:
    pacing = GcPacing(full_every_s=100)
    pacing.after_poll(0.0)
    kept = [Node() for _ in range(1000)]
    pacing.after_poll(1.0)
    assert gc.get_freeze_count() >= len(kept)


def test_a_cycle_made_and_dropped_within_a_poll_is_collected_at_once() -> None:
    pacing = GcPacing(full_every_s=100)
    pacing.after_poll(0.0)
    node = weakref.ref(Node())
    pacing.after_poll(1.0)
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
