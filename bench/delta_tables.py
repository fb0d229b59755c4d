"""The Delta tables the benchmarks query and read, generated on disk rather than shipped.

Large tables are cheap to make here: their data files are hard links to a few small
Parquet files, and the million-entry log has no data files at all. Each generator
leaves a table it finds complete alone, so a second run skips the slow part.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from bench.rows import sample_rows
from share_store.delta.deletion_vectors import serialize_positions, z85_encode
from share_store.iceberg.derived import dv_file_bytes
from testbed.checkpoints import write_checkpoint

BENCH_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def make_delta_table(location: Path, files: int, checkpoint: bool = False) -> None:
    """A Delta table whose log holds `files` adds; the data files are hard links to one file.

    With `checkpoint`, delta-rs also writes a checkpoint of it, as a long-lived
    table has: replaying it then reads Parquet rather than JSON lines.
    """
    done = "00000000000000000000.checkpoint.parquet" if checkpoint else "00000000000000000000.json"
    if (location / "_delta_log" / done).exists():
        return
    shutil.rmtree(location, ignore_errors=True)
    (location / "_delta_log").mkdir(parents=True)
    sample = sample_rows()
    # File systems cap hard links per inode (ext4: 65,000), so each template serves 50,000 files.
    templates = [location / f"template-{index}.parquet" for index in range(files // 50_000 + 1)]
    for template in templates:
        pq.write_table(sample, template)
    size = templates[0].stat().st_size
    with open(location / "_delta_log" / "00000000000000000000.json", "w") as log:
        log.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        log.write(
            json.dumps(
                {
                    "metaData": {
                        "id": "bench",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": BENCH_SCHEMA,
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": 0,
                    }
                }
            )
            + "\n"
        )
        for i in range(files):
            name = f"part-{i:07d}.parquet"
            os.link(templates[i // 50_000], location / name)
            stats = json.dumps(
                {
                    "numRecords": 100,
                    "minValues": {"id": 0, "v": "x0"},
                    "maxValues": {"id": 99, "v": "x99"},
                    "nullCount": {"id": 0, "v": 0},
                }
            )
            log.write(
                json.dumps(
                    {
                        "add": {
                            "path": name,
                            "partitionValues": {},
                            "size": size,
                            "modificationTime": 0,
                            "dataChange": True,
                            "stats": stats,
                        }
                    }
                )
                + "\n"
            )
    for template in templates:
        template.unlink()
    if checkpoint:
        DeltaTable(str(location)).create_checkpoint()


PARTITIONED_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "string", "nullable": True, "metadata": {}},
            {"name": "p", "type": "integer", "nullable": True, "metadata": {}},
        ],
    }
)


def make_partitioned_table(location: Path, files: int, partitions: int) -> None:
    """A Delta table of `files` adds over `partitions` values of integer column `p`.

    File `i` is in partition `i % partitions` and its stats say it holds ids
    `i * 100` to `i * 100 + 99`, so hints on either column select files; the data
    files are hard links to one file, as in `make_delta_table`.
    """
    log = location / "_delta_log"
    if (log / "00000000000000000000.json").exists():
        return
    shutil.rmtree(location, ignore_errors=True)
    log.mkdir(parents=True)
    template = location / "template.parquet"
    pq.write_table(sample_rows(), template)
    size = template.stat().st_size
    metadata = {
        "id": "bench-partitioned",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": PARTITIONED_SCHEMA,
        "partitionColumns": ["p"],
        "configuration": {},
        "createdTime": 0,
    }
    lines = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": metadata}]
    for i in range(files):
        partition = i % partitions
        name = f"p={partition}/part-{i:07d}.parquet"
        (location / name).parent.mkdir(exist_ok=True)
        os.link(template, location / name)
        stats = {
            "numRecords": 100,
            "minValues": {"id": i * 100, "v": "x0"},
            "maxValues": {"id": i * 100 + 99, "v": "x99"},
            "nullCount": {"id": 0, "v": 0},
        }
        add = {
            "path": name,
            "partitionValues": {"p": str(partition)},
            "size": size,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps(stats),
        }
        lines.append({"add": add})
    template.unlink()
    # Written last, under a temporary name: a run stopped half-way leaves no table that looks complete.
    partial = log / "00000000000000000000.json.tmp"
    partial.write_text("".join(json.dumps(line) + "\n" for line in lines))
    partial.rename(log / "00000000000000000000.json")


def make_checkpointed_log(location: Path, files: int) -> None:
    """A table as a long-lived one looks: a checkpoint of `files` adds, then one small commit.

    Only the log is written (the data files need not exist): this measures what
    the server does with a million-entry log, streaming it from the checkpoint.
    """
    log = location / "_delta_log"
    if (log / "_last_checkpoint").exists():
        return
    shutil.rmtree(location, ignore_errors=True)
    log.mkdir(parents=True)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata = {
        "id": "bench-million",
        "format": {"provider": "parquet", "options": []},
        "schemaString": BENCH_SCHEMA,
        "partitionColumns": [],
        "configuration": [],
        "createdTime": 0,
    }

    def add(i: int) -> dict[str, Any]:
        return {
            "path": f"part-{i:07d}-c000.snappy.parquet",
            "partitionValues": [],
            "size": 1_000_000 + i % 1000,
            "modificationTime": 1_700_000_000_000 + i,
            "dataChange": False,
            "stats": f'{{"numRecords":100,"minValues":{{"id":{i * 100},"v":"x0"}},'
            f'"maxValues":{{"id":{i * 100 + 99},"v":"x99"}},"nullCount":{{"id":0,"v":0}}}}',
            "tags": None,
        }

    chunk = 100_000
    batches = ([add(i) for i in range(first, min(first + chunk, files))] for first in range(0, files, chunk))
    write_checkpoint(log / "00000000000000000001.checkpoint.parquet", protocol, metadata, batches)
    (log / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": files + 2}))
    # Commits 0 and 1 were cleaned up after the checkpoint, as log retention does.
    with open(log / "00000000000000000002.json", "w") as commit:
        commit.write(
            json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": 1_700_000_000_000}}) + "\n"
        )
        add = {
            "path": "part-late-c000.snappy.parquet",
            "partitionValues": {},
            "size": 1234,
            "modificationTime": 1_700_000_000_001,
            "dataChange": True,
        }
        commit.write(json.dumps({"add": add}) + "\n")
        remove = {"path": "part-0000000-c000.snappy.parquet", "deletionTimestamp": 1, "dataChange": True}
        commit.write(json.dumps({"remove": remove}) + "\n")


def make_readable(location: Path, table: pa.Table) -> None:
    """A Delta table of 2M rows in 8 files, for whole-table reads."""
    if location.exists():
        return
    for part in range(8):
        write_deltalake(str(location), table.slice(part * 250_000, 250_000), mode="append")


def make_readable_with_dvs(location: Path, readable: Path, every: int = 10) -> None:
    """The readable table's files again, each with a deletion vector dropping every `every`-th row.

    The data files are hard links to the readable table's; one deletion vector
    file per data file, as Spark writes them (`u` descriptors).
    """
    if (location / "_delta_log" / "00000000000000000000.json").exists():
        return
    shutil.rmtree(location, ignore_errors=True)
    (location / "_delta_log").mkdir(parents=True)
    source = DeltaTable(str(readable))
    adds = pa.table(source.get_add_actions(flatten=True)).to_pylist()
    lines = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": "bench-dv",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": source.schema().to_json(),
                "partitionColumns": [],
                "configuration": {"delta.enableDeletionVectors": "true"},
                "createdTime": 0,
            }
        },
    ]
    for add in adds:
        os.link(readable / add["path"], location / add["path"])
        rows = int(add["num_records"])
        payload, cardinality = serialize_positions(range(0, rows, every))
        file_uuid = uuid.uuid4()
        (location / f"deletion_vector_{file_uuid}.bin").write_bytes(dv_file_bytes(payload))
        descriptor = {
            "storageType": "u",
            "pathOrInlineDv": z85_encode(file_uuid.bytes),
            "offset": 1,
            "sizeInBytes": len(payload),
            "cardinality": cardinality,
        }
        stats = json.dumps({"numRecords": rows})
        action = {
            "path": add["path"],
            "partitionValues": {},
            "size": int(add["size_bytes"]),
            "modificationTime": 0,
            "dataChange": True,
            "stats": stats,
            "deletionVector": descriptor,
        }
        lines.append({"add": action})
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (location / "_delta_log" / "00000000000000000000.json").write_text(text)
