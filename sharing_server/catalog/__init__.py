"""The server's own warehouses (the writable catalog, AIStor Tables) over HTTP, at `/_iceberg`.

`routes` the route table; `requests` what a request names; `callers` who is calling
(SigV4, catalog tokens, the admin token); `warehouses` configuration, warehouses and
namespaces; `tables` tables, commits and transactions; `views` views. Decisions are made below, in
`share_store.catalog`.
"""
