"""One poll, as the sidecar and `mirrorlag check` both run it: the LEO snapshot, the feeds' LROs into
the LRO cache (lro_cache.py), the lag engine the poller is handed (wiring.py), a published snapshot
(poller.py)."""
