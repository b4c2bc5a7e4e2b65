"""Kafka edges: admin, metadata and offsets."""
