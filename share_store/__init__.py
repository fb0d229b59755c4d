"""The table server's decisions and rules, with no HTTP: one folder per bounded context, over a platform.

Contexts (each has its wire side in `sharing_server/` under the same name):

- Delta Sharing: shares and tokens (`persistence`), read through the door (`readers`) by format
  (`delta`, `iceberg`) over what every shared table is (`tables`).
- `iceberg_shares`: what a recipient of the read-only Iceberg REST catalog at `/iceberg` may read.
- `catalog`: the writable catalog at `/_iceberg` (AIStor Tables: warehouses, namespaces, tables,
  views, catalog users and policies) and `catalog.maintenance`, which keeps its tables.
- `table_sources`: the provider's own Iceberg catalogs (`[catalogs.NAME]`), where shared Iceberg
  tables are found.

The platform: `persistence` (the share store on SQLAlchemy, `migrations`), `storage`, `signing`,
`authentication`, and `errors` (the refusals every surface maps to its own error model).

Nothing here knows about HTTP: the server maps `share_store.errors` to each protocol's responses,
and readers yield protocol actions as plain dictionaries that the server encodes line by line.
"""
