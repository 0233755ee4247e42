"""The published form: each datasource an Apache Iceberg table in deep storage, registered in
an Iceberg catalog kept in the metadata DB, committed in the publish's own transaction."""
