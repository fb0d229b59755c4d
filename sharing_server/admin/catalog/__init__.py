"""`sharing-server table ...`: the catalog's commands in the grammar AIStor users know.

`grammar.py` (with `words.py`, `maintenance_grammar.py`, `parsing.py`) the grammar, `commands.py`
where they run: on the store as the provider, or through a server's `/_iceberg/v1` (`backend.py`,
`maintenance_backend.py`); `verbs.py`, `maintenance.py`, `users.py` and `spark_maintenance.py`
the commands themselves.
"""
