"""Shared tables as recipients read them: `table_readers` the reader of each (Delta or Iceberg, by
its format), behind which `share_store.iceberg_shares.grants` decides what the Iceberg shares hand
out for one (metadata, signed reads, vended keys). Above the formats (`delta`, `iceberg`) and the
format-free core (`tables`)."""
