"""From records to rows: input formats and decoders, flattening, transforms and filters,
timestamps, aggregators, and the Spark SQL row pipeline."""
