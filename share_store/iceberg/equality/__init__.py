"""Iceberg equality deletes resolved to row positions (`positions.py`), served as deletion vectors:
which delete files apply (`index.py`), reading their keys (`files.py`, `keys.py`), within a deadline
(`deadline.py`)."""
