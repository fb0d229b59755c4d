"""The one door between the HTTP side and the table formats.

`sharing_server` reads tables only through this package: `TableReaders` picks
each shared table's `TableReader` (`reader`), which answers with neutral
values, chiefly the `TableSnapshot` (`snapshot`). What those values mean in
the Delta Sharing protocol's terms lives here too: file actions and their
lines (`actions`, `active_files`), change-feed rules (`changes`), commit times
(`commits`), predicate hints (`predicates`, `compiled_hints`, `hint_leaves`,
`hint_intervals`), persisted head summaries (`summaries`), the settings the
formats read (`options`), and what an Iceberg REST recipient may read of a
table (`iceberg_shares.grants`).

Only `readers` and `iceberg_shares` name a format's own modules
(`share_store.delta`, `share_store.iceberg`); those formats import from here,
never from `sharing_server`.
"""
