"""Each flow's engine parameters, as columns a partition's flow index selects from.

The engine asks for a flow's parameters at most once per update, and only for flows that have
partitions with something to compute (so a reloaded config takes effect at the next poll, and a
flow that left the config is never asked). A handful of flows exist; every rule reads its
parameters per row as `FlowColumns.<name>[row_flow]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np

from mirrorlag.config.settings import EngineParams
from mirrorlag.model import FlowId


@dataclass
class _Flow:
    flow: FlowId
    params: EngineParams | None = None
    mean_bytes: float | None = None  # the mean record size a feed reported, when one knows sizes
    gen: int = -1  # the update that last asked for params; -1: never
    shape: int = 0  # an id of the window shape (window_s, num_samples), new whenever it changes


@dataclass(frozen=True)
class FlowColumns:
    """One update's parameters, one entry per flow index."""

    max_s: np.ndarray  # replication.lag.time.max.ms, seconds
    samples: np.ndarray  # the record-lag window's number of samples (the window itself reads its shape)
    rate_half_s: np.ndarray  # rates span about samples x window; a checkpoint moves every half of it
    points: np.ndarray  # the freshness table answers from its newest `points` (>= 2: interpolation)
    limit: np.ndarray  # and holds at most points + 1, so a full table is cut every other poll
    warn_s: np.ndarray  # AT_RISK below this much retention headroom
    log_start_half_s: np.ndarray  # the log-start rate's checkpoint interval
    mean_bytes: np.ndarray  # NaN: no feed knows record sizes
    shape: np.ndarray  # the window shape id


class Flows:
    """The flows seen so far, indexed in order of appearance (a partition's `flow` column)."""

    def __init__(self, params: Callable[[FlowId], EngineParams]) -> None:
        self._params = params
        self._flows: list[_Flow] = []
        self._index: dict[FlowId, int] = {}
        # shape id -> (window_s, num_samples); id 0 is no shape yet.
        self.shapes: list[tuple[float, int]] = [(0.0, 0)]

    def __len__(self) -> int:
        return len(self._flows)

    def flow_id(self, i: int) -> FlowId:
        return self._flows[i].flow

    def index(self, flow: FlowId) -> int:
        i = self._index.get(flow)
        if i is None:
            i = self._index[flow] = len(self._flows)
            self._flows.append(_Flow(flow))
        return i

    def refresh(self, indexes: Iterable[int], gen: int, sizes: Mapping[FlowId, float]) -> None:
        """Ask for the parameters of flows `indexes`, once in update `gen`."""
        for i in indexes:
            fl = self._flows[i]
            if fl.gen == gen:
                continue
            p = fl.params = self._params(fl.flow)
            fl.mean_bytes = sizes.get(fl.flow)
            fl.gen = gen
            shape = (p.sample_window_s, p.num_samples)
            if self.shapes[fl.shape] != shape:
                fl.shape = len(self.shapes)
                self.shapes.append(shape)

    def columns(self) -> FlowColumns:
        """The parameters as last asked for (a flow never asked reads the defaults' shape 0)."""
        ps = [fl.params or EngineParams() for fl in self._flows]
        window = np.array([p.sample_window_s for p in ps], float)
        samples = np.array([p.num_samples for p in ps], np.int64)
        rate_window = window * samples
        warn = np.array([p.retention_warn_s for p in ps], float)
        points = np.array([max(2, p.freshness_points) for p in ps], np.int64)
        return FlowColumns(
            max_s=np.array([p.lag_time_max_s for p in ps], float),
            samples=samples,
            rate_half_s=rate_window * 0.5,
            points=points,
            limit=points + 1,
            warn_s=warn,
            # The log-start rate spans at least the horizon AT_RISK forecasts, so that one segment
            # deletion (retention deletes whole segments) does not make the forecast flap.
            log_start_half_s=np.maximum(rate_window, warn) * 0.5,
            mean_bytes=np.array([np.nan if fl.mean_bytes is None else fl.mean_bytes for fl in self._flows]),
            shape=np.array([fl.shape for fl in self._flows], np.int64),
        )

    def shape_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(window_s, num_samples) by shape id."""
        return (np.array([s[0] for s in self.shapes]), np.array([s[1] for s in self.shapes], np.int64))
