"""Share model, persistence, table readers and storage signing for the sharing server.

Nothing in this package knows about HTTP: the server maps its errors (see
`share_store.errors`) to protocol responses, and its readers yield protocol
actions as plain dictionaries that the server encodes line by line.
"""
