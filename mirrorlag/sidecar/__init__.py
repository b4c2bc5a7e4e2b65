"""`mirrorlag run`, the long-running sidecar: polls on a schedule and serves /metrics, /status and the
probes (service.py), and says at once which cluster it cannot reach (cluster_watch.py)."""
