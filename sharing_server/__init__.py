"""The table server over HTTP: the Starlette app, the CLI and the console, on top of `share_store`.

One folder per surface, wire work only (routes, parsing, encoding, the mount's proof):
`delta_sharing` (`/delta-sharing`), `iceberg_shares` (`/iceberg`), `catalog` (`/_iceberg`),
`admin` (`/admin/v1` and the `sharing-server` commands), `console` (`/console`); `http`, `auth`,
`observability` and `openapi` serve them all.
"""

__version__ = "0.1.0"
