"""HTTP plumbing every endpoint shares: middleware, connection and rate limits, stream caps,
NDJSON streaming, errors, and local storage's signed file URLs.

Nothing here knows a protocol. May import `sharing_server.auth` (bearer parsing,
for per-token limits), `sharing_server.observability` and `share_store` values
(errors, storage, signing); never the endpoint packages (`protocol`, `admin`,
`iceberg_shares`, `catalog`, `console`).
"""
