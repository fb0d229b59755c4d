"""HTTP plumbing every endpoint shares: middleware, connection and rate limits, stream caps, errors.

Nothing here knows a protocol: these modules may import `share_store` values
(errors, storage) and each other, never the endpoints' packages.
"""
