"""`mirrorlag mirror`: a small replicator that behaves like MirrorMaker 2 on the wire.

A stand-in for MM2 in tests and the demo (separate-process topology); the sidecar never imports it.
"""

from mirrorlag.mirror.replicator import HeartbeatEmitter, Mirror, MirrorFailed, MirrorOptions, mirror_options
from mirrorlag.mirror.sync_state import OffsetSyncWriter, PartitionState

__all__ = [
    "Mirror",
    "MirrorOptions",
    "MirrorFailed",
    "HeartbeatEmitter",
    "mirror_options",
    "OffsetSyncWriter",
    "PartitionState",
]
