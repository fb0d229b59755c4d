"""The Iceberg REST side: the recipients' read-only catalog under `/iceberg`.

What a recipient may read of a table comes through the door
(`share_store.tables.iceberg_grants`); this package holds only the HTTP
handlers and the catalog's JSON shapes.
"""
