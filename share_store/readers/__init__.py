"""Shared tables as recipients read them: `registry` the reader of each (Delta or Iceberg, by its
format), `iceberg_grants` what the share catalog hands out for one (metadata, signed reads, vended
keys). Above the formats (`delta`, `iceberg`) and the format-free core (`tables`)."""
