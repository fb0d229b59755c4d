"""Administration: the admin operations, their REST API, its client, and the `sharing-server` CLI.

`commands` holds the operations on shares, tokens and OAuth clients; `routes`
serves them under `/admin/v1`, behind the admin token (`authentication`); `client` calls a
running server's API; `cli` is the command line over either. May import `sharing_server.http` and
`share_store`, never the protocol or console packages.
"""
