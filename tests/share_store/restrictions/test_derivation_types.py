"""Source files whose Arrow types are not the plain ones pyarrow's kernels take.

A Parquet file written by pyarrow keeps its Arrow schema in the footer, and a reader gets those
types back: a pandas categorical or a `pa.dictionary` column reads as a dictionary, which
`min_max` (the derived file's statistics) does not take. Such a file is read as its plain
type, as Spark's and delta-rs's string columns are.
"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

from share_store.restrictions.derivation import derive
from share_store.restrictions.restriction import Audience, TableRestriction, bind

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "nation", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def test_a_dictionary_typed_string_column_derives_as_plain_strings_with_its_statistics() -> None:
    nations = pa.array(["PERU", "JAPAN", None, "PERU"]).dictionary_encode()
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(range(4), pa.int64()), "nation": nations}), buffer)
    assert pa.types.is_dictionary(pq.read_schema(io.BytesIO(buffer.getvalue())).field("nation").type)
    bound = bind(TableRestriction("nation = 'PERU' OR id = 1", None), SCHEMA, Audience(None, {}))
    derived = derive(io.BytesIO(buffer.getvalue()), bound, {})
    assert derived.content is not None
    rows = pq.read_table(io.BytesIO(derived.content))
    assert rows.schema.field("nation").type == pa.string()
    assert rows.to_pylist() == [{"id": 0, "nation": "PERU"}, {"id": 1, "nation": "JAPAN"},
                                {"id": 3, "nation": "PERU"}]  # fmt: skip
    stats = json.loads(derived.stats)
    assert stats["minValues"]["nation"] == "JAPAN" and stats["maxValues"]["nation"] == "PERU"
