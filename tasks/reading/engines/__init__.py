"""The batch-engine seam. Two engines run a task's micro-batches and merge its persists into
segments, behind one small interface (base.py):

- the Python-worker engine (python_workers.py): librdkafka, orjson and Arrow in Spark's Python
  workers, no shuffle; the common case;
- the Spark SQL engine (spark_sql.py): Spark's Kafka source and the row pipeline in Spark SQL;
  it runs every plan the task accepts.

Which one runs is decided in one place, choice.py, with the reasons a batch falls back."""
