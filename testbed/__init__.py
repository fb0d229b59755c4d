"""The real parts the tests and the benchmarks start, and the tables they write.

- `seaweed`: a SeaweedFS S3 server on loopback (`start_seaweed`), free ports, uploads.
- `fault_proxy`: a loopback TCP proxy that black-holes, resets, slows or refuses the link to
  PostgreSQL or S3 (the fault tests, `make soak`).
- `checkpoints`: Delta checkpoints written by hand, for logs of very many files.
- `deltalake_access`: where deltalake finds a shared table (URI and storage options).
- `spark_iceberg/`: Spark 3.5 + Iceberg from PyPI wheels (`make spark-iceberg`), to write
  Iceberg tables with delete files.

Only `tests` and `bench` import it, so neither imports the other. It is not part of the
distributed package (pyproject.toml's package list leaves it out): it imports from the
project root, which is on sys.path in the editable install, under pytest and with
`python -m bench.run`.
"""
