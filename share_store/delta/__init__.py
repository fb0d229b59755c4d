"""Delta Lake tables: snapshots, versions and their mapping to protocol actions."""
