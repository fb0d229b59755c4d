"""The Delta Sharing protocol: request parsing, table queries, paging, line encoding, routes.

Handlers (`routes`) parse a request (`requests`), ask `queries` for a table's
lines and stream them. Tables are reached only through the door,
`share_store.readers`; signing only through `share_store.signing`. May import
`sharing_server.http` and `sharing_server.observability`, never the admin,
console or Iceberg REST packages.
"""
