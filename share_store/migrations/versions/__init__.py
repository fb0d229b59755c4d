"""The store's schema migrations, one Alembic script per revision, run in order by `share_store.migrate`."""
