"""The benchmarks behind `make bench`, a package so they import the project and `testbed`.

Run from the project root as `python -m bench.run`: the root is then on sys.path, so
`share_store`, `sharing_server` and `testbed` (SeaweedFS, hand-written checkpoints, the
Spark 3.5 + Iceberg session; shared with the tests) import without any path tweaking.
Nothing here imports `tests`.
"""
