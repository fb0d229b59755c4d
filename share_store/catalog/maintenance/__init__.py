"""Maintenance of the catalog's tables: compaction, snapshot expiry, unreferenced files.

`configuration` (what to do, S3 Tables' words), `expiry`, `compaction` and
`unreferenced` (each kind, its decisions pure and its commits through the
catalog's compare-and-swap), `rows` (configurations, runs, marks and the lease
in the store).
"""
