"""The catalog: the writable Iceberg REST catalog this server keeps itself (AIStor Tables) at `/_iceberg`.

Warehouses of Iceberg tables and views, their catalog users and policies, layered as Lakekeeper
and Polaris are: callers (who is calling) → access (what the policy allows) → the catalog (commit
and location rules) → rows (compare-and-swap in the share store). `maintenance` keeps its tables.
The wire side is `sharing_server.catalog`.
"""
