"""What the engine remembers of every partition between polls: one typed array per field, a row
per partition, rows in the engine's key order.

Flat columns rather than an object per partition, so that a poll is a few dozen numpy operations
over all partitions and the state costs no Python object per partition. Offsets are int64 (Kafka's
are), times float64; "unknown" is a `has_<name>` mask beside an int column and NaN in a float
column (times are never NaN). Small counts, indexes and codes take the narrowest type their bound
allows and only widen (`widen`), so they cost a byte or two a partition.
"""

from __future__ import annotations

import mmap

import numpy as np

# The per-partition fields, by type (a new partition: 0, False, NaN for the optional floats).
INTS = ("prev_leo", "lro_seen", "rewind_mark", "la_x", "lb_x", "ca_x", "cb_x", "log_start", "sa_x", "sb_x",
        "lost_through", "f_leo0", "f_tick0", "data_from", "data_to")
OPTIONAL_INTS = ("prev_leo", "lro_seen", "rewind_mark", "log_start", "data_from")  # each with a has_<name> mask
FLOATS = ("prev_t", "last_caught_up", "first_seen_t", "la_t", "lb_t", "ca_t", "cb_t", "ls_rate", "sa_t", "sb_t")
OPTIONAL_FLOATS = ("last_caught_up", "first_seen_t", "lb_t", "ls_rate")  # NaN: unknown
_INT_TYPES = (np.int8, np.int16, np.int32, np.int64)


TABLE_COLUMNS = ("t_leo", "t_tick")  # the freshness table: 2-D, stored point by point (`table_planes`)


def table_planes(n: int, width: int) -> tuple[np.ndarray, mmap.mmap | None]:
    """An (n, width) uint32 array stored point slot by point slot ("planes": slot j of every row is
    contiguous), in an anonymous mapping of its own: pages nobody wrote are never resident. A
    table keeps only the points still needed (`freshness.prune`), so a healthy estate writes a
    few planes and the rest cost nothing; an outage fills them. The mapping, not malloc: a heap
    chunk handed out by calloc is zeroed by writing it, which would make every plane resident."""
    size = n * width * 4
    if not size:
        return np.zeros((n, width), np.uint32), None
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)  # private: given-back pages read as zeros again
    return np.frombuffer(buf, np.uint32).reshape(width, n).T, buf


def fit(bound: int) -> type:
    """The narrowest signed type that holds 0..bound (signed: a stray n - 1 cannot wrap to huge)."""
    return next(t for t in _INT_TYPES if bound <= np.iinfo(t).max)


class PartitionColumns:
    """The per-partition state (docs/design.md §3's memory of each partition), one array per field.

    Field groups, by the rule that owns them:
    - time lag: prev_leo/prev_t (the previous LEO snapshot), last_caught_up, first_seen_t;
    - rewinds: lro_seen (the last LRO on this log), rewind_mark (the LRO before a step back);
    - rates: la/lb (the LEO's two checkpoints), ca/cb (the LRO's), each an offset _x and time _t;
    - retention: log_start, its rate ls_rate and checkpoints sa/sb, lost_through, data_from (the
      offset of the first data record at or after LRO + 1, where the source probe proved one)
      and data_to (every offset in [data_from, data_to) proved a data record);
    - freshness: the table t_leo/t_tick (offsets from f_leo0/f_tick0, stored by point slot:
      `table_planes`), f_count points in use;
    - the record-lag window: w_* per sample (start, count, min, max, sum), w_cur, w_created, and
      the window shape it was built in;
    - the flow (an index into the engine's flows) and the last LRO seen (a GONE row reports it).

    A table count is at most `points` (the table's width), a window index or count of samples at
    most `samples`, a poll count in a sample at most the engine's number of updates, and flow,
    shape and feed codes index the engine's lists, which only grow.
    """

    def __init__(self, n: int, samples: int, points: int) -> None:
        self.n = n
        self.samples = samples
        self.points = points
        self.a: dict[str, np.ndarray] = {}
        for name in INTS:
            self.a[name] = np.zeros(n, np.int64)
        for name in OPTIONAL_INTS:
            self.a["has_" + name] = np.zeros(n, bool)
        for name in FLOATS:
            self.a[name] = np.full(n, np.nan if name in OPTIONAL_FLOATS else 0.0)
        self.a["f_count"] = np.zeros(n, fit(points))
        self.a["w_cur"] = np.zeros(n, fit(samples))
        self.a["w_created"] = np.zeros(n, fit(samples))
        self.a["shape"] = np.zeros(n, np.int8)
        # What proves a time lag that counts from the first look: 0 nothing asked, 1 the probe was
        # asked to date record LRO + 1 and has not answered (a lower bound), 2 it answered.
        self.a["proof"] = np.zeros(n, np.int8)
        self.a["flow"] = np.zeros(n, np.int8)
        # The newest LRO seen: its offset and a code into the engine's feed names (-1: none).
        self.a["last_lro_off"] = np.zeros(n, np.int64)
        self.a["last_lro_feed"] = np.full(n, -1, np.int8)
        self.a["w_start"] = np.zeros((n, samples))
        # int32 from the start, not widened as polls go by: 68 years of 1 s polls.
        self.a["w_count"] = np.zeros((n, samples), np.int32)
        self.a["w_min"] = np.full((n, samples), np.inf)
        self.a["w_max"] = np.full((n, samples), -np.inf)
        self.a["w_sum"] = np.zeros((n, samples))
        self._maps: list[mmap.mmap] = []
        for name in TABLE_COLUMNS:
            self.a[name], buf = table_planes(n, points)
            if buf is not None:
                self._maps.append(buf)

    def release_table_planes(self) -> None:
        """Give back the pages of the table planes past the longest table but one (the next
        point's slot): after an outage the tables shrink again, and so does the memory."""
        keep = int(self.a["f_count"].max(initial=0)) + 1
        for buf in self._maps:
            start = -(-keep * self.n * 4 // mmap.PAGESIZE) * mmap.PAGESIZE  # the first whole page past them
            if start < len(buf):
                buf.madvise(mmap.MADV_DONTNEED, start, len(buf) - start)

    def moved(self, n: int, old_rows: np.ndarray, new_rows: np.ndarray, samples: int, points: int) -> "PartitionColumns":
        """A new set of rows: new_rows[i] takes this set's old_rows[i]; the others start empty."""
        out = PartitionColumns(n, max(samples, self.samples), max(points, self.points))
        used = int(self.a["f_count"].max(initial=0))
        for name, old in self.a.items():
            new = out.a[name]
            if new.dtype != old.dtype and np.promote_types(new.dtype, old.dtype) == old.dtype:
                new = out.a[name] = new.astype(old.dtype)  # widened before: stays so
            if name in TABLE_COLUMNS:
                new[new_rows, :used] = old[old_rows, :used]  # the points in use: planes past them stay untouched
            elif old.ndim == 2:
                new[new_rows, :old.shape[1]] = old[old_rows]
            else:
                new[new_rows] = old[old_rows]
        return out

    def grown(self, samples: int, points: int) -> "PartitionColumns":
        """The same rows with room for `samples` window samples and `points` table points."""
        if samples <= self.samples and points <= self.points:
            return self
        rows = np.arange(self.n)
        return self.moved(self.n, rows, rows, samples, points)

    def widen(self, name: str, bound: int) -> None:
        """Let column `name` hold values up to `bound`."""
        a = self.a[name]
        if bound > np.iinfo(a.dtype).max:
            self.a[name] = a.astype(fit(bound))

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["a"][name]
        except KeyError:
            raise AttributeError(name) from None
