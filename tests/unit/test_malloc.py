"""tune_malloc: applied on glibc, never over the operator's own MALLOC_* settings."""

from __future__ import annotations

import platform

import pytest

from mirrorlag.malloc import tune_malloc


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_applied_on_glibc() -> None:
    assert tune_malloc({}) is True


@pytest.mark.parametrize("name", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"])
def test_left_alone_when_the_environment_sets_it(name: str) -> None:
    assert tune_malloc({name: "65536"}) is False
