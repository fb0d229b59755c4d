"""Iceberg tables shared through Delta Sharing ("uniform").

An Iceberg table is presented to the protocol layer as if it were a Delta log:
each snapshot in the current ancestry becomes a dense, persisted version, its
data files become `add` actions, and its schema a Delta schema with column
mapping by field id. pyiceberg is imported lazily, only when an Iceberg table
is shared.
"""
