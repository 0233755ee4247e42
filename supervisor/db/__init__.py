"""The metadata store: SQLAlchemy models, engine set-up with migrations, repositories."""
