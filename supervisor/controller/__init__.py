"""The supervisor engine: observe → plan → execute, one reconcile loop per supervisor."""
