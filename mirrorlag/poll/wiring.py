"""The one place that picks the lag engine the poller is handed (docs/design.md §2: the engine is a stage
of its own, not built inside the poller). The sidecar and `mirrorlag check` both build theirs here."""

from __future__ import annotations

from mirrorlag.config.settings import Settings
from mirrorlag.engine import LagEngine
from mirrorlag.interfaces import Engine


def lag_engine(settings: Settings) -> Engine:
    """A fresh engine whose per-flow parameters are the settings' (read at each update)."""
    return LagEngine(lambda flow_id: settings.flow(flow_id).engine)
