"""heap_trimmer: glibc's malloc_trim where there is glibc, and GcPacing calls it after each poll."""

from __future__ import annotations

import gc
import platform

import pytest

from mirrorlag.process.gc_pacing import GcPacing
from mirrorlag.process.malloc import heap_trimmer


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim")
def test_trims_on_glibc() -> None:
    trim = heap_trimmer()
    assert trim is not None
    assert trim() in (0, 1)  # 1: memory was released, 0: there was none to release


def test_gc_pacing_releases_memory_after_each_poll() -> None:
    calls = []
    pacing = GcPacing(full_every_s=100, release_memory=lambda: calls.append(gc.isenabled()))
    try:
        for now in (0.0, 1.0):
            with pacing.around_poll(clock=lambda now=now: now):
                pass
    finally:
        gc.unfreeze()
    assert calls == [False, False]  # after the freeze, before the collector is back on


def test_a_failing_release_never_replaces_the_polls_own_outcome(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def broken() -> None:
        calls.append(1)
        raise OSError("no such symbol")

    pacing = GcPacing(full_every_s=100, release_memory=broken)
    was_enabled = gc.isenabled()
    try:
        with pytest.raises(ValueError, match="the poll's own error"):
            with pacing.around_poll(clock=lambda: 0.0):
                raise ValueError("the poll's own error")
        with pacing.around_poll(clock=lambda: 1.0):
            pass  # a poll that succeeds stays a success
    finally:
        gc.unfreeze()
    assert calls == [1]  # warned once, then not tried again
    assert gc.isenabled() == was_enabled
    assert [r.levelname for r in caplog.records if "releasing free heap memory" in r.message] == ["WARNING"]
