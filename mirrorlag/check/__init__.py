"""`mirrorlag check`, the one-shot check: one poll of the partitions (run.py), the consumer groups'
failover readiness (groups.py), which clusters answer (reach.py), the sidecar's own verdict read over
HTTP (url.py), and the Nagios status line, perfdata and exit status they all answer with (output.py)."""
