"""Who is calling: bearer tokens, the OAuth client-credentials endpoint, recipients' profile files.

Every comparison of a secret is constant-time, and only hashes are stored
(`share_store.authentication.tokens`). Imported by `http` and every endpoint package; imports
only `sharing_server.observability` (to note the caller in the audit record).
"""
