"""Spark jobs shipped with the server, for what is better done by a Spark cluster than by the server.

Each module here is a standalone PySpark script: it imports the standard library and pyspark
only, so `spark-submit` (or any Python with pyspark) runs it by its path in an environment
where this package is not installed. It lives in the package, in a folder of its own (Python
puts the script's folder first on `sys.path`: nothing else here may shadow a module), so an
installed server can find it; `sharing_server.admin.catalog.spark_maintenance` launches it.
"""
