"""Failover readiness per consumer group (docs/design.md §9): where each group would resume on the target
and how much it would read again or miss."""
