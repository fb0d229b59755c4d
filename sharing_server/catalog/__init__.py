"""The catalog (the writable catalog, AIStor Tables) over HTTP, at `/_iceberg`.

`routes` the route table and its mount; `endpoints` what the handlers work with (the caller
included); `codec` the REST bodies read
and the answers written; `warehouses` configuration, warehouses and namespaces; `tables` tables,
commits and transactions; `views` views; `maintenance` its maintenance API. Decisions are made
below, in `share_store.catalog`.
"""
