"""What the server tells its operator: the audit log, the persisted activity, Prometheus metrics.

Nothing secret is written here: tokens appear by id, never by value. The
bottom layer of `sharing_server`: imports none of its other packages.
"""
