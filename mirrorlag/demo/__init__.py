"""`mirrorlag demo`: two embedded brokers, traffic, a replicator that falls behind, and the sidecar."""
