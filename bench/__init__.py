"""The benchmarks behind `make bench`, a package so they import the project and its test helpers.

Run from the project root as `python -m bench.run`: the root is then on sys.path, so
`share_store`, `sharing_server` and `tests.seaweed` import without any path tweaking.
"""
