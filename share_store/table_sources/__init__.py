"""Where Iceberg tables are found: the provider's catalogs, as the `[catalogs]` settings name them.

A catalog is configuration, not a table format: the server loads Iceberg
tables through the registry here and reads them with `share_store.iceberg`.
"""
