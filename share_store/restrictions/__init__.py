"""Restricted tables: part of a shared table, per share and recipient, served exactly.

A provider restricts a shared table to the rows where a SQL predicate holds and
to a list of columns (`sharing-server share restrict`). The predicate may name
a recipient's properties (`CURRENT_RECIPIENT('k')`), so one share serves each
recipient its own rows. Nothing a recipient is sent holds a row or column
outside its restriction: files are kept, left out or derived (rewritten with only
the allowed rows and columns) before any URL is signed, since the protocol's
predicate hints and deletion vectors are advisory and a client may ignore them.

    restriction.py        what is stored (the text typed) and what a request binds it to
    row_filters.py        the predicate's grammar: parsed with sqlglot, checked, bound
    filter_text.py        a predicate printed back as SQL, and the key of its derived files
    column_types.py       the table's column types, and values read as them
    file_verdicts.py      what a file's partition values and statistics prove of its rows
    arrow_filters.py      the predicate over Arrow record batches (the derived files' rows)
    derivation.py         a derived file: the allowed rows and columns of one data file
    derived_files.py      where derived files are kept, once, for every replica
    restricted_metadata.py  what the table shows of its metadata and commits
    restricted_reader.py  the door's `TableReader` of a restricted table
"""
