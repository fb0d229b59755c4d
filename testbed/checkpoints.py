"""Delta checkpoints written by hand: a log's protocol, metadata and many `add` rows in one Parquet file.

For tables too large to write through a Delta writer in a test or a benchmark:
the data files need not exist for what reads only the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

STRING_MAP = pa.map_(pa.string(), pa.string())
ADD_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", STRING_MAP),
    ]
)
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
COLUMNS = {"add": ADD_TYPE, "metaData": METADATA_TYPE, "protocol": PROTOCOL_TYPE}
SCHEMA = pa.schema(list(COLUMNS.items()))


def write_checkpoint(
    path: Path, protocol: dict[str, Any], metadata: dict[str, Any], adds: Iterable[list[dict[str, Any]]]
) -> None:
    """A checkpoint at `path`: a row each for `protocol` and `metadata`, then the `add` rows,
    a record batch per list of `adds` (maps as lists of pairs, as Arrow takes them)."""
    with pq.ParquetWriter(path, SCHEMA) as writer:
        head = {"add": [None, None], "metaData": [None, metadata], "protocol": [protocol, None]}
        writer.write_table(pa.table({k: pa.array(v, COLUMNS[k]) for k, v in head.items()}, schema=SCHEMA))
        for batch in adds:
            rows = {
                "add": pa.array(batch, ADD_TYPE),
                "metaData": pa.nulls(len(batch), METADATA_TYPE),
                "protocol": pa.nulls(len(batch), PROTOCOL_TYPE),
            }
            writer.write_table(pa.table(rows, schema=SCHEMA))
