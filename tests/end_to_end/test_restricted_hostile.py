"""Restricted tables (issue 50) attacked by a hostile recipient and a careless provider.

The provider sets everything up through the CLI and the admin API against a
running server; the recipient then asks every endpoint it can, downloads every
URL it is given and reads each file raw (footer included), and looks for any
row outside the filter or any column outside the list: names and values, in
bodies, URLs, statistics, partition values, metadata and error messages.

A test that shows a leak or a 500 is `xfail(strict=True)` with what leaks, so
that it lands without hiding the bug; an attack refused correctly is a plain test.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, TESTDATA_BUCKET, Deployment, copy_testdata
from tests.end_to_end.test_restricted_tables import customers

SHARE, SCHEMA = "hostile", "sales"
DELTA_CAPABILITIES = "responseformat=delta;readerfeatures=deletionvectors,columnmapping"
#: The column-mapped test table's physical names (tests/data/delta/table_with_column_mapping).
COMPANY_PHYSICAL = "col-173b4db9-b5ad-427f-9e75-516aae37fbbb"
NAME_PHYSICAL = "col-3877fd94-0973-4941-ac6b-646849a1ff65"
SECRET_PHYSICAL = "col-5ec7e7a0-0000-4000-8000-00000000dead"


def _add_and_drop_a_mapped_column(table: Path) -> None:
    """Two commits as Spark writes them on a column-mapped table: v1 adds `Secret Notes` and a
    file holding it, v2 drops the column (`ALTER TABLE DROP COLUMN`: metadata only, the file stays)."""
    log = table / "_delta_log"
    first = [json.loads(line) for line in (log / "00000000000000000000.json").read_text().splitlines()]
    metadata = next(a["metaData"] for a in first if "metaData" in a)
    schema = json.loads(metadata["schemaString"])
    secret = {
        "name": "Secret Notes",
        "type": "string",
        "nullable": True,
        "metadata": {"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": SECRET_PHYSICAL},
    }
    added = schema | {"fields": [*schema["fields"], secret]}
    (table / "Zz").mkdir()
    data = pa.table({NAME_PHYSICAL: ["Eve Secretholder"], SECRET_PHYSICAL: ["top-secret-value"]})
    pq.write_table(data, table / "Zz" / "part-00000-secret.parquet")
    size = (table / "Zz" / "part-00000-secret.parquet").stat().st_size
    stats = {
        "numRecords": 1,
        "minValues": {NAME_PHYSICAL: "Eve Secretholder", SECRET_PHYSICAL: "top-secret-value"},
        "maxValues": {NAME_PHYSICAL: "Eve Secretholder", SECRET_PHYSICAL: "top-secret-value"},
        "nullCount": {NAME_PHYSICAL: 0, SECRET_PHYSICAL: 0},
    }
    config = metadata["configuration"] | {"delta.columnMapping.maxColumnId": "3"}
    one = [
        {"commitInfo": {"timestamp": 1699946189972, "operation": "ADD COLUMNS"}},
        {"metaData": metadata | {"schemaString": json.dumps(added), "configuration": config}},
        {"add": {"path": "Zz/part-00000-secret.parquet", "partitionValues": {COMPANY_PHYSICAL: "BMS"},
                 "size": size, "modificationTime": 1699946189000, "dataChange": True,
                 "stats": json.dumps(stats)}},
    ]  # fmt: skip
    two = [
        {"commitInfo": {"timestamp": 1699946289972, "operation": "DROP COLUMNS"}},
        {"metaData": metadata | {"configuration": config}},
    ]
    (log / "00000000000000000001.json").write_text("\n".join(json.dumps(a) for a in one) + "\n")
    (log / "00000000000000000002.json").write_text("\n".join(json.dumps(a) for a in two) + "\n")


def _name_the_cut_column_in_metadata(table: Path) -> None:
    """One more commit as writers make it, naming `ssn` everywhere a table's metadata may: a
    generation expression and an identity column on served columns, a constraint, a clustering
    domain and an operation's parameters."""
    log = table / "_delta_log"
    commits = sorted(log.glob("*.json"))
    metadata = None
    for commit in commits:
        for line in commit.read_text().splitlines():
            if "metaData" in json.loads(line):
                metadata = json.loads(line)["metaData"]
    assert metadata is not None
    schema = json.loads(metadata["schemaString"])
    for field in schema["fields"]:
        if field["name"] == "name":
            field["metadata"] = {"delta.generationExpression": "concat('customer-', ssn)"}
        if field["name"] == "custkey":
            field["metadata"] = {"delta.identity.start": 1, "delta.identity.step": 1,
                                 "delta.identity.highWaterMark": 99, "comment": "the key"}  # fmt: skip
    config = metadata["configuration"] | {"delta.constraints.ssn_set": "ssn IS NOT NULL"}
    actions = [
        {"commitInfo": {"timestamp": 1799999999000, "operation": "CLUSTER BY",
                        "operationParameters": {"clusterBy": "[\"ssn\"]"}}},
        {"metaData": metadata | {"schemaString": json.dumps(schema), "configuration": config}},
        {"domainMetadata": {"domain": "delta.clustering",
                            "configuration": json.dumps({"clusteringColumns": [["ssn"]]}), "removed": False}},
    ]  # fmt: skip
    version = int(commits[-1].stem) + 1
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


@pytest.fixture(scope="module")
def provider(server: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tables each attack needs, one share of them all, recipients and a share token."""
    root = Path(server.config.storage["root"]) / TESTDATA_BUCKET
    root.mkdir(parents=True, exist_ok=True)
    customers_uri = str(root / "customers")
    write_deltalake(customers_uri, customers(0, 40), partition_by=["region"],
                    configuration={"delta.enableChangeDataFeed": "true"})  # fmt: skip
    write_deltalake(customers_uri, customers(40, 20), partition_by=["region"], mode="append")
    # Schema evolution: v1 adds `tier`.
    evolved = str(root / "evolved")
    write_deltalake(evolved, customers(0, 10).select(["custkey", "name"]))
    later = customers(10, 10).select(["custkey", "name"]).append_column("tier", pa.array(["gold"] * 10))
    write_deltalake(evolved, later, mode="append", schema_mode="merge")
    # NULLs in a filtered column.
    write_deltalake(str(root / "nulls"), pa.table({
        "id": pa.array(range(8), pa.int64()),
        "x": pa.array([1, 9, None, 3, None, 7, 10, None], pa.int64()),
        "f": pa.array([1.0, float("nan"), None, 3.0, 8.0, 7.0, float("nan"), 2.0], pa.float64()),
    }))  # fmt: skip
    # Partition values with LIKE's and regex's special characters.
    codes = ["a.c", "abc", "a(c", "a_c", "a%c", "a*c", "A.C"]
    write_deltalake(str(root / "likes"), pa.table({
        "id": pa.array(range(len(codes)), pa.int64()), "code": codes,
    }), partition_by=["code"])  # fmt: skip
    # Strings longer than the 32 characters statistics keep.
    prefix = "p" * 40
    write_deltalake(str(root / "longs"), pa.table({
        "id": pa.array(range(4), pa.int64()),
        "s": [prefix + "a", prefix + "b", prefix + "c", prefix + "d"],
    }))  # fmt: skip
    # CHECK constraints that name the column cut.
    constrained = str(root / "constrained")
    write_deltalake(constrained, customers(0, 6).select(["custkey", "name", "ssn"]))
    DeltaTable(constrained).alter.add_constraint({"ssn_shape": "ssn LIKE 'ssn-%'"})
    DeltaTable(constrained).delete("ssn = 'ssn-00003'")  # its commitInfo names ssn and a value
    _name_the_cut_column_in_metadata(Path(constrained))
    copy_testdata(server, "cdf-table", "moves")
    copy_testdata(server, "delta-0.8.0-null-partition", "null_parts")
    moments = [datetime(2024, 1, 1, 9, 59, 59, 999000), datetime(2024, 1, 1, 10), datetime(2024, 1, 2, 10)]
    write_deltalake(str(root / "times"), pa.table({
        "id": pa.array(range(3), pa.int64()),
        "day": pa.array([m.date() for m in moments], pa.date32()),
        "at": pa.array(moments, pa.timestamp("us", tz="UTC")),
        "at_stat": pa.array(moments, pa.timestamp("us", tz="UTC")),
    }), partition_by=["day", "at"])  # fmt: skip
    # A decompression bomb as delta-rs writes one: one long value, kept once in a dictionary.
    write_deltalake(str(root / "bombs"), pa.table({
        "id": pa.array(range(8192), pa.int64()), "rank": pa.array([1] * 8192, pa.int64()),
        "blob": pa.array(["z" * 1024] * 8192),
    }))  # fmt: skip
    copy_testdata(server, "table_with_deletion_logs")
    copy_testdata(server, "table_with_column_mapping", "mapped")
    copy_testdata(server, "table_with_column_mapping", "mapped_drop")
    _add_and_drop_a_mapped_column(root / "mapped_drop")
    tmp = tmp_path_factory.mktemp("hostile")
    cli = ["--server", server.server.url, "--admin-token", ADMIN_TOKEN]
    tables = {
        "customers": "customers", "people": "table_with_deletion_logs", "evolved": "evolved",
        "nulls": "nulls", "likes": "likes", "longs": "longs", "constrained": "constrained",
        "mapped": "mapped", "mapped_drop": "mapped_drop", "moves": "moves", "null_parts": "null_parts",
        "times": "times", "bombs": "bombs",
    }  # fmt: skip
    specs = [f"{name}:delta:{TESTDATA_BUCKET}:{path}" for name, path in tables.items()]
    assert main([*cli, "share", "create", SHARE, SCHEMA, *specs]) == 0
    profiles = {}
    for name, properties in [
        ("acme", ["nation=JAPAN", "key=3"]),
        ("bolt", ["nation=PERU", "key=abc"]),
        ("mallory", ["nation=' OR 1=1 --", "key=1 OR 1=1"]),
    ]:
        flags = [part for prop in properties for part in ("--property", prop)]
        assert main([*cli, "recipient", "create", name, *flags]) == 0
        assert main([*cli, "recipient", "grant", name, SHARE]) == 0
        profile = tmp / f"{name}.share"
        assert (
            main([*cli, "recipient", "token", "create", name, "--expires", "7d", "--profile", str(profile)])
            == 0
        )
        profiles[name] = str(profile)
    share_profile = tmp / "share-token.share"
    assert main([*cli, "token", "create", SHARE, "--expires", "1d", "--profile", str(share_profile)]) == 0
    profiles["share-token"] = str(share_profile)
    return {"cli": cli, "profiles": profiles, "root": root, "server": server}


# -- the recipient's side of the wire --------------------------------------------------------------


def restrict(provider: dict[str, Any], table: str, *args: str) -> int:
    return main([*provider["cli"], "share", "restrict", SHARE, f"{SCHEMA}/{table}", *args])


def _settings(profile: str) -> tuple[str, dict[str, str]]:
    settings = json.loads(Path(profile).read_text())
    return settings["endpoint"], {"Authorization": f"Bearer {settings['bearerToken']}"}


def ask(
    profile: str, table: str, endpoint: str, body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None, delta: bool = False,
) -> httpx.Response:  # fmt: skip
    """One request of a table's endpoint (`query` is a POST, the others GETs)."""
    base, headers = _settings(profile)
    if delta:
        headers["delta-sharing-capabilities"] = DELTA_CAPABILITIES
    url = f"{base}/shares/{SHARE}/schemas/{SCHEMA}/tables/{table}/{endpoint}"
    if endpoint == "query":
        return httpx.post(url, json=body or {}, headers=headers, params=params, timeout=60)
    return httpx.get(url, headers=headers, params=params, timeout=60)


def lines_of(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines() if line.strip()]


def file_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if set(line) & {"file", "add", "cdf", "remove"}]


def actions(lines: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each file line's action (delta format's inner action, or the parquet format's body)."""
    found = []
    for line in file_lines(lines):
        body = next(iter(line.values()))
        if "deltaSingleAction" in body:
            kind, action = next(iter(body["deltaSingleAction"].items()))
            found.append((kind, action | {"url": action["path"]}))
        else:
            found.append((next(iter(line)), body))
    return found


def downloads(lines: list[dict[str, Any]]) -> list[pq.ParquetFile]:
    """Every signed file, downloaded and opened raw (no deletion vector, no schema applied)."""
    files = []
    for _, action in actions(lines):
        got = httpx.get(action["url"], timeout=60)
        assert got.status_code == 200
        files.append(pq.ParquetFile(io.BytesIO(got.content)))
    return files


def footer_text(parquet: pq.ParquetFile) -> str:
    """Everything a file's footer says besides its rows: key-value metadata and field names."""
    metadata = parquet.metadata.metadata or {}
    parts = [
        key.decode(errors="replace") + "=" + value.decode(errors="replace") for key, value in metadata.items()
    ]
    return "\n".join([*parts, *parquet.schema_arrow.names])


def every_surface(
    provider: dict[str, Any], profile: str, table: str, formats: tuple[bool, ...] = (False, True),
    changes: bool = False,
) -> list[httpx.Response]:  # fmt: skip
    """Each endpoint of a table a recipient can ask, in both formats (`formats`: delta or not; a
    column-mapped table is served in the delta format only); `changes` for a table with a change
    data feed."""
    answers = []
    for delta in formats:
        answers += [
            ask(profile, table, "metadata", delta=delta),
            ask(profile, table, "query", {}, delta=delta),
            ask(profile, table, "query", {"version": 0}, delta=delta),
            ask(profile, table, "query", {"startingVersion": 0}, delta=delta),
        ]
        if changes:
            params = {"startingVersion": 0, "includeHistoricalMetadata": "true"}
            answers.append(ask(profile, table, "changes", params=params, delta=delta))
    answers.append(ask(profile, table, "version"))
    base, headers = _settings(profile)
    answers.append(httpx.get(f"{base}/shares/{SHARE}/all-tables", headers=headers, timeout=30))
    return answers


# -- attacks: the most dangerous first ------------------------------------------------------------------


def test_a_derived_files_footer_names_no_cut_column(provider: dict[str, Any]) -> None:
    assert restrict(provider, "people", "--where", "age > 30", "--columns", "id,name,age") == 0
    lines = lines_of(ask(provider["profiles"]["acme"], "people", "query", {}))
    files = downloads(lines)
    assert files
    for parquet in files:
        assert set(parquet.schema_arrow.names) <= {"id", "name", "age"}  # the columns themselves hold
        text = footer_text(parquet)
        for cut in ("address", "company", "phone_number", "nbr"):
            assert cut not in text, f"{cut!r} in a derived file's footer"


def test_a_cut_partition_column_is_in_no_url(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--columns", "custkey,name,nation,acctbal,ssn") == 0
    for delta in (False, True):
        lines = lines_of(ask(provider["profiles"]["acme"], "customers", "query", {}, delta=delta))
        found = actions(lines)
        assert found
        for _, action in found:
            assert "region" not in json.dumps(action.get("partitionValues", {}))
            assert "region" not in action["url"] and "emea" not in action["url"], action["url"]


def test_a_dropped_column_of_a_mapped_table_is_never_served(provider: dict[str, Any]) -> None:
    assert restrict(provider, "mapped_drop", "--columns", "Super Name,Company Very Short") == 0
    for body in ({}, {"version": 1}, {"startingVersion": 0}):
        answer = ask(provider["profiles"]["acme"], "mapped_drop", "query", body, delta=True)
        lines = lines_of(answer)
        assert SECRET_PHYSICAL not in answer.text and "top-secret-value" not in answer.text
        for parquet in downloads(lines):
            assert SECRET_PHYSICAL not in parquet.schema_arrow.names
            assert SECRET_PHYSICAL not in footer_text(parquet)


def test_an_earlier_version_without_the_filter_column_names_no_cut_column(provider: dict[str, Any]) -> None:
    assert restrict(provider, "evolved", "--where", "tier = 'gold'", "--columns", "custkey,name") == 0
    latest = lines_of(ask(provider["profiles"]["acme"], "evolved", "query", {}))
    assert "tier" not in json.dumps(latest)
    for body in ({"version": 0}, {"startingVersion": 0}):
        answer = ask(provider["profiles"]["acme"], "evolved", "query", body)
        assert answer.status_code in (400, 403, 404), answer.text
        assert "url" not in answer.text
        assert "tier" not in answer.text, answer.text


def test_a_cut_partition_column_of_a_mapped_table_is_in_no_line(provider: dict[str, Any]) -> None:
    assert restrict(provider, "mapped", "--columns", "Super Name") == 0
    profile = provider["profiles"]["acme"]
    for answer in every_surface(provider, profile, "mapped", formats=(True,)):
        assert answer.status_code == 200, answer.text
        for secret in ("Company Very Short", COMPANY_PHYSICAL, '"BMS"', '"BME"'):
            assert secret not in answer.text, (secret, answer.request.url)
    lines = lines_of(ask(profile, "mapped", "query", {}, delta=True))
    for parquet in downloads(lines):
        assert COMPANY_PHYSICAL not in footer_text(parquet)
        assert parquet.schema_arrow.names == [NAME_PHYSICAL]


def test_no_cut_column_name_in_any_endpoint_and_no_row_outside_the_filter(provider: dict[str, Any]) -> None:
    where = "acctbal > 100 AND nation = CURRENT_RECIPIENT('nation')"
    assert restrict(provider, "customers", "--where", where, "--columns", "custkey,name,nation,acctbal") == 0
    profile = provider["profiles"]["acme"]
    for answer in every_surface(provider, profile, "customers", changes=True):
        assert answer.status_code == 200, (answer.request.url, answer.text)
        for cut in ("ssn", "region", "emea", "apac"):
            assert cut not in answer.text, (cut, answer.request.url)
        if answer.request.method == "GET" and "/changes" not in str(answer.request.url):
            continue
        lines = [json.loads(line) for line in answer.text.splitlines()]
        for _, action in actions(lines):
            assert "deletionVector" not in action
        for parquet in downloads(lines):
            rows = parquet.read().to_pandas()
            assert set(rows.columns) <= {"custkey", "name", "nation", "acctbal", "_change_type"}
            assert (rows.nation == "JAPAN").all() and (rows.acctbal > 100).all()


def test_hints_and_limits_cannot_widen_what_is_served(provider: dict[str, Any]) -> None:
    assert (
        restrict(provider, "customers", "--where", "nation = 'JAPAN'", "--columns", "custkey,nation,acctbal")
        == 0
    )
    profile = provider["profiles"]["acme"]
    hint_on_cut = {"op": "equal", "children": [
        {"op": "column", "name": "ssn", "valueType": "string"},
        {"op": "literal", "value": "ssn-00003", "valueType": "string"}]}  # fmt: skip
    hint_other_nation = {"op": "equal", "children": [
        {"op": "column", "name": "nation", "valueType": "string"},
        {"op": "literal", "value": "PERU", "valueType": "string"}]}  # fmt: skip
    for body in (
        {"limitHint": 1},
        {"predicateHints": ["nation = 'PERU'", "ssn = 'ssn-00003'"]},
        {"jsonPredicateHints": json.dumps(hint_on_cut)},
        {"jsonPredicateHints": json.dumps(hint_other_nation)},
    ):
        for delta in (False, True):
            answer = ask(profile, "customers", "query", body, delta=delta)
            assert answer.status_code in (200, 400), answer.text
            if answer.status_code == 400:
                assert "ssn" not in answer.text or "ssn" in json.dumps(body)
                continue
            for parquet in downloads(lines_of(answer)):
                rows = parquet.read().to_pandas()
                assert set(rows.columns) <= {"custkey", "nation", "acctbal"}
                assert (rows.nation == "JAPAN").all()


def test_a_page_token_reused_after_the_restriction_changes_serves_only_the_new_restriction(
    provider: dict[str, Any],
) -> None:
    assert restrict(provider, "customers", "--where", "nation = 'JAPAN'", "--columns", "custkey,nation") == 0
    profile = provider["profiles"]["acme"]
    first = lines_of(ask(profile, "customers", "query", {"maxFiles": 1}))
    token = next(
        (line["endStreamAction"]["nextPageToken"] for line in first if "endStreamAction" in line), None
    )
    assert token, "the first page must leave a page to come"
    assert (
        restrict(provider, "customers", "--where", "nation = 'PERU'", "--columns", "custkey,nation,acctbal")
        == 0
    )
    answer = ask(profile, "customers", "query", {"maxFiles": 100, "pageToken": token})
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 200:
        for parquet in downloads(lines_of(answer)):
            rows = parquet.read().to_pandas()
            assert (rows.nation == "PERU").all()
            assert set(rows.columns) <= {"custkey", "nation", "acctbal"}


def test_a_property_changed_between_two_pages_serves_the_new_value_only(provider: dict[str, Any]) -> None:
    assert (
        restrict(
            provider,
            "customers",
            "--where",
            "nation = CURRENT_RECIPIENT('nation')",
            "--columns",
            "custkey,nation",
        )
        == 0
    )
    cli, profile = provider["cli"], provider["profiles"]["bolt"]
    first = lines_of(ask(profile, "customers", "query", {"maxFiles": 1}))
    token = next(line["endStreamAction"]["nextPageToken"] for line in first if "endStreamAction" in line)
    assert main([*cli, "recipient", "update", "bolt", "--property", "nation=FRANCE"]) == 0
    try:
        answer = ask(profile, "customers", "query", {"maxFiles": 100, "pageToken": token})
        assert answer.status_code in (200, 400), answer.text
        if answer.status_code == 200:
            for parquet in downloads(lines_of(answer)):
                assert set(parquet.read().to_pandas().nation) <= {"FRANCE"}
    finally:
        assert main([*cli, "recipient", "update", "bolt", "--property", "nation=PERU"]) == 0


def test_a_share_token_on_a_recipient_table_is_a_403_naming_the_property(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "nation = CURRENT_RECIPIENT('nation')") == 0
    for endpoint, body in [
        ("query", {}),
        ("query", {"startingVersion": 0}),
        ("metadata", None),
        ("changes", None),
    ]:
        params = {"startingVersion": 0} if endpoint == "changes" else None
        answer = ask(provider["profiles"]["share-token"], "customers", endpoint, body, params=params)
        if endpoint == "metadata" and answer.status_code == 200:
            # No --columns: the schema is the whole table's, which names no recipient's value.
            assert "JAPAN" not in answer.text and "url" not in answer.text
            continue
        assert answer.status_code == 403, (endpoint, answer.text)
        assert "'nation'" in answer.json()["message"]
        assert "url" not in answer.text and "JAPAN" not in answer.text


def test_a_property_value_that_is_sql_is_a_value_not_sql(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "nation = CURRENT_RECIPIENT('nation')") == 0
    answer = ask(provider["profiles"]["mallory"], "customers", "query", {})
    files = downloads(lines_of(answer))
    assert sum(parquet.metadata.num_rows for parquet in files) == 0  # no nation is "' OR 1=1 --"


def test_a_property_value_the_column_cannot_hold_is_a_403(provider: dict[str, Any]) -> None:
    assert (
        restrict(
            provider, "customers", "--where", "custkey = CURRENT_RECIPIENT('key')", "--columns", "custkey"
        )
        == 0
    )
    for name in ("bolt", "mallory"):  # 'abc' and '1 OR 1=1' for a long column
        answer = ask(provider["profiles"][name], "customers", "query", {})
        assert answer.status_code == 403, answer.text
        assert "'key'" in answer.json()["message"] and "url" not in answer.text
    rows = [
        p.read().to_pandas()
        for p in downloads(lines_of(ask(provider["profiles"]["acme"], "customers", "query", {})))
    ]
    assert [list(r.custkey) for r in rows if len(r)] == [[3]]


def test_not_over_nulls_serves_no_null_row(provider: dict[str, Any]) -> None:
    for where, allowed in [
        ("NOT (x > 5)", lambda x: x is not None and not x > 5),
        ("NOT (x IS NULL OR x > 5)", lambda x: x is not None and not x > 5),
        ("NOT (x IN (1, 3))", lambda x: x is not None and x not in (1, 3)),
        ("x <> 9", lambda x: x is not None and x != 9),
    ]:
        assert restrict(provider, "nulls", "--where", where, "--columns", "id,x") == 0
        for delta in (False, True):
            for parquet in downloads(
                lines_of(ask(provider["profiles"]["acme"], "nulls", "query", {}, delta=delta))
            ):
                values = parquet.read().column("x").to_pylist()
                assert all(allowed(x) for x in values), (where, values)


def test_nan_floats_are_never_proven_by_statistics(provider: dict[str, Any]) -> None:
    assert restrict(provider, "nulls", "--where", "f < 100", "--columns", "id,f") == 0
    served: list[Any] = []
    for parquet in downloads(lines_of(ask(provider["profiles"]["acme"], "nulls", "query", {}))):
        served += parquet.read().column("f").to_pylist()
    # As the server's filter reads SQL: NaN < 100 is false (pyarrow) and NULL is not served.
    assert None not in served
    assert all(value == value and value < 100 for value in served), served


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [("a.c", {"a.c"}), ("a(%", {"a(c"}), ("a*c", {"a*c"}),
     ("a_c", {"a.c", "abc", "a(c", "a_c", "a%c", "a*c"}),
     ("a\\_c", {"a_c"}), ("a\\%c", {"a%c"}), ("A.%", {"A.C"})],
)  # fmt: skip
def test_like_on_a_partition_column_with_regex_characters(
    provider: dict[str, Any], pattern: str, expected: set[str]
) -> None:
    assert restrict(provider, "likes", "--where", f"code LIKE '{pattern}'") == 0
    lines = lines_of(ask(provider["profiles"]["acme"], "likes", "query", {}))
    served = {action["partitionValues"]["code"] for _, action in actions(lines)}
    assert served == expected


def test_strings_past_the_truncated_statistics_are_filtered_exactly(provider: dict[str, Any]) -> None:
    prefix = "p" * 40
    for where, allowed in [
        (f"s < '{prefix}b'", {prefix + "a"}),
        (f"s <= '{prefix}'", set()),
        (f"s = '{prefix}c'", {prefix + "c"}),
        (f"s > '{prefix[:32]}'", {prefix + c for c in "abcd"}),
        (f"s LIKE '{prefix}_'", {prefix + c for c in "abcd"}),
    ]:
        assert restrict(provider, "longs", "--where", where) == 0
        served: set[str] = set()
        for parquet in downloads(lines_of(ask(provider["profiles"]["acme"], "longs", "query", {}))):
            served |= set(parquet.read().column("s").to_pylist())
        assert served == allowed, where


def test_case_and_backquotes_in_column_names_bind_the_same_column(provider: dict[str, Any]) -> None:
    assert (
        restrict(
            provider,
            "customers",
            "--where",
            "`NATION` = 'PERU' AND AcctBal >= 0",
            "--columns",
            "CUSTKEY,Nation",
        )
        == 0
    )
    for parquet in downloads(lines_of(ask(provider["profiles"]["acme"], "customers", "query", {}))):
        rows = parquet.read().to_pandas()
        assert set(rows.columns) == {"custkey", "nation"} and (rows.nation == "PERU").all()


def test_a_check_constraint_naming_a_cut_column_is_not_shown(provider: dict[str, Any]) -> None:
    assert restrict(provider, "constrained", "--columns", "custkey,name") == 0
    for answer in every_surface(provider, provider["profiles"]["acme"], "constrained"):
        assert answer.status_code == 200, answer.text
        assert "ssn" not in answer.text, answer.request.url
        assert "ssn_shape" not in answer.text


def test_schema_evolution_keeps_a_later_unlisted_column_out(provider: dict[str, Any]) -> None:
    assert restrict(provider, "evolved", "--columns", "custkey,name") == 0
    profile = provider["profiles"]["acme"]
    for answer in every_surface(provider, profile, "evolved"):
        assert answer.status_code == 200, (answer.request.url, answer.text)
        assert "tier" not in answer.text and "gold" not in answer.text
    for delta in (False, True):
        for parquet in downloads(
            lines_of(ask(profile, "evolved", "query", {"startingVersion": 0}, delta=delta))
        ):
            assert "tier" not in parquet.schema_arrow.names


# -- the provider's side --------------------------------------------------------------------------


def admin_put(provider: dict[str, Any], table: str, body: dict[str, Any]) -> httpx.Response:
    url = (
        f"{provider['server'].server.url}/admin/v1/shares/{SHARE}/schemas/{SCHEMA}/tables/{table}/restriction"
    )
    return httpx.put(url, json=body, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60)


def test_restricting_a_table_that_does_not_exist_is_one_error(
    provider: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main([*provider["cli"], "share", "restrict", SHARE, f"{SCHEMA}/nope", "--where", "x = 1"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
    assert admin_put(provider, "nope", {"where": "x = 1"}).status_code == 404


def test_a_column_list_of_partition_columns_only_is_a_clear_error_not_a_500(provider: dict[str, Any]) -> None:
    code = restrict(provider, "customers", "--columns", "region")
    if code == 0:  # accepted: the request must then be refused clearly, with nothing served
        answer = ask(provider["profiles"]["acme"], "customers", "query", {})
        assert answer.status_code == 400, answer.text
        assert "partition" in answer.json()["message"] and "url" not in answer.text
    else:
        assert code == 2


@pytest.mark.parametrize(
    "where",
    [
        "(" * 9990 + "custkey > 1" + ")" * 9990,
        " OR ".join(f"custkey = {i}" for i in range(1600)),
        "custkey IN (" + ", ".join(str(i) for i in range(3500)) + ")",
        "NOT " * 4000 + "custkey > 1",
        # Just under the 8192 characters a filter may have: as deep as one can go.
        "(" * 4080 + "custkey > 1" + ")" * 4080,
        " OR ".join(f"custkey = {i}" for i in range(600)),
        " AND ".join(f"custkey <> {i}" for i in range(560)),
        "NOT " * 2040 + "custkey > 1",
        "custkey IN (" + ", ".join(str(i) for i in range(1600)) + ")",
    ],
    ids=["deep-parens", "long-or-chain", "huge-in-list", "deep-not", "parens-8k", "or-chain-8k",
         "and-chain-8k", "not-8k", "in-list-8k"],
)  # fmt: skip
def test_a_huge_where_is_a_400_or_works_never_a_500(provider: dict[str, Any], where: str) -> None:
    assert len(where) >= 5000
    answer = admin_put(provider, "customers", {"where": where, "columns": ["custkey", "nation"]})
    assert answer.status_code in (200, 204, 400), answer.text[:500]
    if answer.status_code == 400:
        return
    served = ask(provider["profiles"]["acme"], "customers", "query", {})
    assert served.status_code in (200, 400, 403), served.text[:500]


def test_a_restriction_naming_a_cut_column_is_enforced_without_serving_it(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "ssn LIKE 'ssn-0001%'", "--columns", "custkey") == 0
    answers = every_surface(provider, provider["profiles"]["acme"], "customers", changes=True)
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert "ssn" not in answer.text
    keys: set[int] = set()
    for parquet in downloads(lines_of(ask(provider["profiles"]["acme"], "customers", "query", {}))):
        assert parquet.schema_arrow.names == ["custkey"]
        keys |= set(parquet.read().column("custkey").to_pylist())
    assert keys == set(range(10, 20))


def test_the_whole_file_folder_is_not_reachable_by_editing_a_signed_url(provider: dict[str, Any]) -> None:
    """A derived file's URL edited to name the source file (same signature) is refused."""
    assert restrict(provider, "people", "--where", "age > 30", "--columns", "id,name,age") == 0
    lines = lines_of(ask(provider["profiles"]["acme"], "people", "query", {}))
    originals = [p.name for p in (provider["root"] / "table_with_deletion_logs").glob("*.parquet")]
    assert originals
    for _, action in actions(lines):
        url = httpx.URL(action["url"])
        name = url.path.rsplit("/", 1)[-1]
        edited = str(url).replace(name, originals[0])
        assert httpx.get(edited, timeout=30).status_code in (400, 401, 403, 404)


def test_an_update_moving_a_row_out_of_the_filter_is_served_as_its_delete(provider: dict[str, Any]) -> None:
    assert restrict(provider, "moves", "--where", "birthday = DATE '2023-12-23'", "--columns", "id,name") == 0
    profile = provider["profiles"]["acme"]
    answer = ask(profile, "moves", "changes", params={"startingVersion": 0, "endingVersion": 3}, delta=True)
    labels: list[tuple[int, str]] = []
    for kind, action in actions(lines_of(answer)):
        assert "birthday" not in json.dumps(action.get("partitionValues", {}))
        rows = pq.read_table(io.BytesIO(httpx.get(action["url"], timeout=60).content)).to_pylist()
        for row in rows:
            assert set(row) <= {"id", "name", "_change_type"}
            labels.append((row["id"], row.get("_change_type", kind)))
    # Bob, Dave and Kate were born on the 23rd and moved to the 22nd by version 1: the recipient
    # sees each deleted, and never their new row (outside the filter) nor an update label.
    updated = [(key, label) for key, label in labels if key in (2, 3, 4) and label != "add"]
    assert sorted(updated) == [(2, "delete"), (3, "delete"), (4, "delete")], labels
    assert not [label for _, label in labels if label.startswith("update_")]


def test_null_partition_values_never_pass_a_negated_filter(provider: dict[str, Any]) -> None:
    for where, expected in [
        ("NOT (k = 'A')", set()),
        ("k <> 'A'", set()),
        ("k IS NULL", {None}),
        ("k IS NOT NULL", {"A"}),
        ("NOT (k IS NULL) OR k = 'B'", {"A"}),
    ]:
        assert restrict(provider, "null_parts", "--where", where) == 0
        lines = lines_of(ask(provider["profiles"]["acme"], "null_parts", "query", {}))
        served = {action["partitionValues"]["k"] for _, action in actions(lines)}
        assert served == expected, where


def test_date_and_timestamp_partitions_and_millisecond_bounds_are_exact(provider: dict[str, Any]) -> None:
    for where, ids in [
        ("day >= DATE '2024-01-02'", {2}),
        ("at < TIMESTAMP '2024-01-01 10:00:00'", {0}),
        ("at = TIMESTAMP '2024-01-01 10:00:00'", {1}),
        ("at_stat < TIMESTAMP '2024-01-01 10:00:00'", {0}),
        ("at_stat > TIMESTAMP '2024-01-01 09:59:59.999'", {1, 2}),
        ("NOT (day = DATE '2024-01-01')", {2}),
    ]:
        assert restrict(provider, "times", "--where", where, "--columns", "id,day,at,at_stat") == 0
        served: set[int] = set()
        for delta in (False, True):
            lines = lines_of(ask(provider["profiles"]["acme"], "times", "query", {}, delta=delta))
            for parquet in downloads(lines):
                served |= set(parquet.read().column("id").to_pylist())
        assert served == ids, where


def test_a_property_value_error_names_no_cut_column(provider: dict[str, Any]) -> None:
    assert (
        restrict(
            provider, "customers", "--where", "custkey = CURRENT_RECIPIENT('key')", "--columns", "nation"
        )
        == 0
    )
    answer = ask(provider["profiles"]["bolt"], "customers", "query", {})
    assert answer.status_code == 403, answer.text
    assert "custkey" not in answer.text and "url" not in answer.text


def test_a_20000_character_where_through_the_cli_is_one_error_line(
    provider: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    where = "(" * 9990 + "custkey > 1" + ")" * 9990
    code = restrict(provider, "customers", "--where", where, "--columns", "custkey")
    err = capsys.readouterr().err.strip()
    assert code in (0, 2)
    if code == 2:
        assert err.startswith("error:") and "\n" not in err and len(err) < 2000


def test_a_filter_on_a_mapped_column_with_spaces_is_applied_by_its_physical_name(
    provider: dict[str, Any],
) -> None:
    for where, allowed in [
        ("`Super Name` < 'M'", lambda name: name < "M"),
        ("`super name` LIKE '%a%' AND `Company Very Short` = 'BMS'", lambda name: "a" in name),
    ]:
        assert restrict(provider, "mapped", "--where", where, "--columns", "Super Name") == 0
        lines = lines_of(ask(provider["profiles"]["acme"], "mapped", "query", {}, delta=True))
        names: list[str] = []
        for parquet in downloads(lines):
            assert parquet.schema_arrow.names == [NAME_PHYSICAL]
            names += parquet.read().column(NAME_PHYSICAL).to_pylist()
        assert names and all(allowed(name) for name in names), (where, names)
    # The second filter names the partition: only BMS's file, whose name is "Anthony..." etc.
    assert "Timothy Lamb" not in names


def test_no_deletion_vector_and_no_cut_column_in_any_line_of_a_table_with_vectors(
    provider: dict[str, Any],
) -> None:
    assert restrict(provider, "people", "--where", "age > 30", "--columns", "id,name,age") == 0
    answers = every_surface(provider, provider["profiles"]["acme"], "people")
    for answer in answers:
        assert answer.status_code == 200, (answer.request.url, answer.text)
        for secret in ("deletionVector", "phone_number", "company", "address", '"nbr"'):
            assert secret not in answer.text, (secret, answer.request.url)
    lines = lines_of(ask(provider["profiles"]["acme"], "people", "query", {"startingVersion": 0}, delta=True))
    for parquet in downloads(lines):
        frame = parquet.read().to_pandas()
        assert set(frame.columns) <= {"id", "name", "age"} and (frame.age > 30).all()


def test_time_travel_by_timestamp_is_restricted_too(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "nation = 'FRANCE'", "--columns", "custkey,nation") == 0
    first = DeltaTable(str(provider["root"] / "customers")).history()[-1]  # version 0's commit
    moment = datetime.fromtimestamp(first["timestamp"] / 1000, UTC).isoformat().replace("+00:00", "Z")
    profile = provider["profiles"]["acme"]
    for delta in (False, True):
        answer = ask(profile, "customers", "query", {"timestamp": moment}, delta=delta)
        assert "ssn" not in answer.text and "region" not in answer.text
        files = downloads(lines_of(answer))
        assert files
        for parquet in files:
            rows = parquet.read().to_pandas()
            assert set(rows.columns) == {"custkey", "nation"} and (rows.nation == "FRANCE").all()


def test_a_source_file_that_decodes_past_the_budget_is_a_clear_400_naming_no_column(
    provider: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from share_store.restrictions import derivation

    bombs = provider["root"] / "bombs"
    on_disk = sum(path.stat().st_size for path in bombs.glob("*.parquet"))
    assert on_disk < 256 * 1024  # 8 MiB of rows decoded, in a few KiB
    # The server's budget made small, as a real bomb's gigabytes are past the real one.
    small = derivation.DecodeBudget(row_group_bytes=4 * 1024 * 1024, batch_bytes=256 * 1024)
    monkeypatch.setattr(derivation, "BUDGET", small)
    assert restrict(provider, "bombs", "--where", "rank = 1", "--columns", "id,blob") == 0
    profile = provider["profiles"]["acme"]
    for delta in (False, True):
        answer = ask(profile, "bombs", "query", {}, delta=delta)
        assert answer.status_code == 400, answer.text
        body = answer.json()
        assert body["errorCode"] == "UNSUPPORTED_OPERATION"
        assert "decodes past" in body["message"] and "4 MiB a row group" in body["message"]
        for secret in ("rank", "Traceback", "part-", ".parquet"):
            assert secret not in answer.text, secret
    with pytest.raises(Exception, match="decodes past"):
        delta_sharing.load_as_pandas(f"{profile}#{SHARE}.{SCHEMA}.bombs")
    # Within the budget, the same file is served, its batches bounded.
    monkeypatch.setattr(derivation, "BUDGET", derivation.DecodeBudget(batch_bytes=256 * 1024))
    lines = lines_of(ask(profile, "bombs", "query", {}))
    (parquet,) = downloads(lines)
    assert parquet.metadata.num_rows == 8192 and parquet.schema_arrow.names == ["id", "blob"]
    assert max(parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)) < 8192
