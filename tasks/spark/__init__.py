"""Spark plumbing: the session with the Kafka connector (session.py) and the driver's JVM
class archive (class_archive.py, trained by training.py)."""
