"""Schema migrations of the share store (Alembic scripts, run by `share_store.migrate`)."""
