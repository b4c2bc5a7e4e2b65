"""Giving the heap's free pages back to the system after each poll (glibc).

Each poll allocates and frees blocks of megabytes (dicts and lists with an entry per partition,
Arrow's buffers for /metrics). glibc serves a block of 128 KiB or more from mmap and
returns it when freed, but after the first such block is freed it raises that threshold (up to
32 MiB), so later ones come from the heap, whose freed pages stay resident. `malloc_trim(0)` once
after each poll hands them back (cheap, and ctypes releases the GIL around it). Fixing the
thresholds instead saves as much memory but makes every render fault its buffers in afresh,
which is slower.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable


def heap_trimmer() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`, or None where there is none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return lambda: trim(0)
