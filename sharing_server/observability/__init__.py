"""What the server tells its operator: the audit log, the persisted activity, Prometheus metrics.

Nothing secret is written here: tokens appear by id, never by value.
"""
