"""The embedded development stack: resolved jars, a local Kafka broker, PostgreSQL for tests."""
