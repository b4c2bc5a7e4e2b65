"""glibc malloc settings for the long-running sidecar.

Each poll at 100k partitions allocates and frees blocks of megabytes (100k-entry dicts and
lists, Arrow's buffers for /metrics). glibc serves a block of 128 KiB or more from mmap and
returns it when freed, but after the first such block is freed it raises that threshold (up to
32 MiB), so later ones come from the heap, whose freed pages mostly stay resident. Fixing both
thresholds at 128 KiB keeps big blocks on mmap and trims the heap's free top: at 100k partitions
RSS after the polls went 360 -> 337 MiB and while serving 418 -> 364 MiB (tests/bench/RESULTS.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Mapping

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 128 * 1024
_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")  # the operator's own tuning wins


def tune_malloc(environ: Mapping[str, str] = os.environ) -> bool:
    """Fix glibc's mmap and trim thresholds; False where there is no glibc (musl, macOS) or the
    environment already sets them."""
    if any(name in environ for name in _ENV):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES))
