"""mirrorlag: how far behind is the MirrorMaker 2 mirror? KIP-971's replication-record-lag, as a sidecar."""

__version__ = "0.1.0"

from mirrorlag.feeds.callback import ReplicationTracker  # noqa: E402  (public API)

__all__ = ["ReplicationTracker", "__version__"]
