"""Reading exact Kafka offset ranges: the batch engines (Python workers, Spark SQL), the
direct librdkafka reads of the Python workers, and the combined reads of quiet tasks."""
