"""Exporters read immutable snapshots; they never reach back into the poller."""
