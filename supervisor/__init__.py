"""Sluicegate's overlord: the control plane that keeps Kafka topics ingested exactly once."""

__version__ = "0.1.0"
