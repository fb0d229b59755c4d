"""`spark.read.format("deltaSharing")` in pure PySpark (Spark 4 Python data sources).

Spark imports every top-level module named `pyspark_*` that exports a
`DefaultSource`, so installing this package is all it takes: no JVM jar, no
`register` call, and `delta_sharing.load_as_spark` works unchanged.
"""

from pyspark_delta_sharing.source import DeltaSharingDataSource

DefaultSource = DeltaSharingDataSource

__all__ = ["DefaultSource", "DeltaSharingDataSource"]
