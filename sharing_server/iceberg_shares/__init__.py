"""Iceberg shares: the recipients' read-only Iceberg REST catalog at `/iceberg`, opened by share
tokens.

What a recipient may read of a table comes through the door
(`share_store.iceberg_shares.grants`); this package holds only the HTTP
handlers (`routes`), the share token they are opened by (`authentication`) and how engines read
the files (`delegation`).
"""
