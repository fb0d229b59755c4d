"""HTTP plumbing every endpoint shares: middleware, connection and rate limits, stream caps,
NDJSON streaming, errors, and local storage's signed file URLs; and what both Iceberg REST
catalogs read off the wire alike: their error model, a remote-signing body (`sign_requests`),
the access-delegation header (`access_delegation`).

Nothing here knows an endpoint. May import `sharing_server.auth` (bearer parsing,
for per-token limits), `sharing_server.observability` and `share_store` values
(errors, storage, signing); never the endpoint packages (`protocol`, `admin`,
`iceberg_shares`, `catalog`, `console`).
"""
