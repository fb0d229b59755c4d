"""Iceberg shares: what a recipient of the read-only Iceberg REST catalog at `/iceberg` may read.

`grants.py` decides it for one table of a share (its metadata, signed reads, vended keys); the
wire side is `sharing_server/iceberg_shares/`.
"""
