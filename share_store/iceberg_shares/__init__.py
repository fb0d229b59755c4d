"""Iceberg shares: what a recipient of the read-only Iceberg REST catalog at `/iceberg` may read.

`share_tables.py` finds a token's share's namespaces and tables, and which table's grant signs a
read, refusing as the store does; `grants.py` decides it for one table of a share (its metadata,
signed reads, vended keys); the wire side is `sharing_server/iceberg_shares/`.
"""
