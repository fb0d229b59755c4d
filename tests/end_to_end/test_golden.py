"""Conformance with tables someone else wrote: Delta Spark's golden tables, read through the server.

Each table in `tests/data/golden/` comes with the rows Spark reads from it.
Every table is read with the real Python client in both response formats, and at
older versions where a sibling table's log is a prefix of its own (the sibling's
rows are then this table's rows at that version). Each read ends one of three
ways: `ok` (exactly the expected rows), `refused` (a clear protocol error from the
server, never rows), or `wrong`. No read may be wrong; what is refused is pinned
in `REFUSED`, so a change in either direction shows up here.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import delta_sharing
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from requests import HTTPError

from share_store.model import TableSpec
from tests.conftest import Deployment, deploy

#: Delta Spark's golden tables, kept in the repository (tests/data/README.md says whose they are).
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
BUCKET = "golden"
FORMATS = ("parquet", "delta")

#: (table, format) reads the server refuses, and why. The parquet format has no way to say
#: which rows a deletion vector deletes or which physical column a logical one is, and
#: its readers know no timestamp without time zone: those tables are the delta format's.
REFUSED: dict[tuple[str, str], str] = {
    ("data-reader-timestamp_ntz-id-mode", "parquet"): "column mapping, timestampNtz",
    ("data-skipping-basic-stats-all-types-columnmapping-id", "parquet"): "column mapping",
    ("dv-partitioned-with-checkpoint", "parquet"): "deletion vectors",
    ("log-replay-dv-key-cases", "parquet"): "deletion vectors",
    ("parquet-all-types", "parquet"): "timestampNtz",
    ("table-with-columnmapping-mode-id", "parquet"): "column mapping",
}


ALTERED_PROTOCOLS = {
    "future-protocol": {"minReaderVersion": 99, "minWriterVersion": 99},
    "empty-feature-lists": {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": [],
        "writerFeatures": [],
    },
}


def table_names() -> list[str]:
    return sorted(p.name for p in GOLDEN.iterdir() if (p / "delta" / "_delta_log").is_dir())


def share_name(table: str) -> str:
    return "t_" + table.replace("-", "_")


def commits(table: str) -> list[bytes]:
    log = GOLDEN / table / "delta" / "_delta_log"
    return [p.read_bytes() for p in sorted(log.glob("*.json"))]


def sibling_versions() -> list[tuple[str, int, str]]:
    """(table, version, sibling): `table` at `version` holds `sibling`'s expected rows."""
    names = table_names()
    found = []
    for table in names:
        own = commits(table)
        for sibling in names:
            theirs = commits(sibling)
            if sibling != table and 0 < len(theirs) < len(own) and own[: len(theirs)] == theirs:
                found.append((table, len(theirs) - 1, sibling))
    return found


def expected_rows(table: str) -> list[tuple[Any, ...]]:
    files = sorted((GOLDEN / table / "expected").glob("*.parquet"))
    frames = [pq.read_table(f).to_pandas() for f in files]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return canonical(frame)


def canonical(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of plain values, columns by name, comparable across readers."""
    columns = sorted(frame.columns)
    rows = [tuple(_plain(row[c]) for c in columns) for row in frame.to_dict("records")]
    return sorted(rows, key=repr)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray | list | tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, float | np.floating):
        return None if math.isnan(value) else float(value)
    if isinstance(value, pd.Timestamp | dt.datetime):
        stamp = pd.Timestamp(value)
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        return stamp.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, np.generic):
        return value.item()
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("golden")
    root = tmp / "buckets"
    for table in table_names():
        shutil.copytree(GOLDEN / table / "delta", root / BUCKET / table)
    # Two copies of a plain table, each given a new protocol by one more commit.
    for name, protocol in ALTERED_PROTOCOLS.items():
        shutil.copytree(GOLDEN / "basic-decimal-table" / "delta", root / BUCKET / name)
        commit = json.dumps({"protocol": protocol}) + "\n"
        (root / BUCKET / name / "_delta_log" / f"{1:020}.json").write_text(commit)
    deployment = deploy(tmp, {"type": "local", "root": str(root)})
    names = [*table_names(), *ALTERED_PROTOCOLS]
    specs = [TableSpec.parse(f"{share_name(t)}:delta:{BUCKET}:{t}", "golden") for t in names]
    deployment.store.create_share("golden", specs)
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def read(profile: str, table: str, response_format: str, version: int | None = None) -> str | list:
    """The rows read, or the refusal's error code."""
    url = f"{profile}#golden.golden.{share_name(table)}"
    try:
        frame = delta_sharing.load_as_pandas(
            url, version=version, use_delta_format=response_format == "delta"
        )
    except HTTPError as error:
        assert error.response is not None and error.response.status_code < 500, error
        return error.response.json()["errorCode"]
    return canonical(frame)


def outcome(result: str | list, expected: list[tuple[Any, ...]]) -> str:
    if isinstance(result, str):
        return "refused"
    return "ok" if result == expected else "wrong"


@pytest.mark.parametrize("response_format", FORMATS)
@pytest.mark.parametrize("table", table_names())
def test_latest_version(golden: Deployment, table: str, response_format: str) -> None:
    result = read(golden.profile("golden"), table, response_format)
    got = outcome(result, expected_rows(table))
    want = "refused" if (table, response_format) in REFUSED else "ok"
    assert got == want, (table, response_format, result if got == "refused" else "rows differ")


@pytest.mark.parametrize("response_format", FORMATS)
@pytest.mark.parametrize(("table", "version", "sibling"), sibling_versions())
def test_older_version_holds_the_sibling_tables_rows(
    golden: Deployment, table: str, version: int, sibling: str, response_format: str
) -> None:
    result = read(golden.profile("golden"), table, response_format, version)
    assert outcome(result, expected_rows(sibling)) == "ok", (table, version, sibling, response_format)


@pytest.mark.parametrize("response_format", FORMATS)
def test_a_reader_version_from_the_future_is_refused_never_served(
    golden: Deployment, response_format: str
) -> None:
    """Served as version 1 in the parquet format, it would hand out a table no reader may read."""
    assert read(golden.profile("golden"), "future-protocol", response_format) == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize("response_format", FORMATS)
def test_empty_feature_lists_read_in_both_formats(golden: Deployment, response_format: str) -> None:
    """delta-kernel refuses reader version 3 without `readerFeatures`: an empty list must stay."""
    result = read(golden.profile("golden"), "empty-feature-lists", response_format)
    assert outcome(result, expected_rows("basic-decimal-table")) == "ok"


def test_the_readme_reports_these_counts() -> None:
    """Every read above is pinned ok or refused, so the counts follow from the pins."""
    reads = len(FORMATS) * (len(table_names()) + len(sibling_versions()))
    refused = len(REFUSED)
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"{reads} reads: {reads - refused} exactly Spark's rows, {refused} refused, 0 wrong" in text
