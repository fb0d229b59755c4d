"""Restricted tables as a provider sets them and recipients read them (issue 50).

The provider shares tables through the CLI against a running server, restricts
them (`share restrict`), gives named recipients properties, and recipients read
with the real delta-sharing client in both response formats, by time travel and
by change feed. Each recipient's rows are compared with the provider's filter
applied to a direct read; then every URL the server signs for the recipient is
downloaded and each file read raw (ignoring deletion vectors, as a hostile
client would) to assert that no row outside the filter and no column outside
the list reaches it.
"""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from share_store.delta.replay import LogReader
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, TESTDATA_BUCKET, Deployment, copy_testdata
from tests.dv import read_with_deletion_vectors

NATIONS = ["JAPAN", "FRANCE", "PERU"]


def customers(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "custkey": pa.array(ids, pa.int64()),
            "name": [f"customer-{i}" for i in ids],
            "nation": [NATIONS[i % 3] for i in ids],
            "acctbal": [float((i * 37) % 500) for i in ids],
            "ssn": [f"ssn-{i:05d}" for i in ids],  # the personal column no recipient gets
            "region": ["emea" if i % 2 else "apac" for i in ids],
        }
    )


@pytest.fixture(scope="module")
def provider(server: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two tables (one partitioned and written in three versions with a delete, one with deletion
    vectors), a share with both, recipients with properties, and their profiles."""
    root = Path(server.config.storage["root"]) / TESTDATA_BUCKET
    uri = str(root / "customers")
    write_deltalake(uri, customers(0, 40), partition_by=["region"],
                    configuration={"delta.enableChangeDataFeed": "true"})  # fmt: skip
    write_deltalake(uri, customers(40, 20), partition_by=["region"], mode="append")
    DeltaTable(uri).delete("custkey % 7 = 0")
    copy_testdata(server, "table_with_deletion_logs")
    tmp = tmp_path_factory.mktemp("restricted")
    cli = ["--server", server.server.url, "--admin-token", ADMIN_TOKEN]
    assert main([*cli, "share", "create", "partners", "sales",
                 f"customers:delta:{TESTDATA_BUCKET}:customers",
                 f"people:delta:{TESTDATA_BUCKET}:table_with_deletion_logs"]) == 0  # fmt: skip
    profiles = {}
    for name, nation in [("acme", "JAPAN"), ("bolt", "PERU"), ("nobody", None)]:
        properties = ["--property", f"nation={nation}"] if nation else []
        assert main([*cli, "recipient", "create", name, *properties]) == 0
        assert main([*cli, "recipient", "grant", name, "partners"]) == 0
        profile = tmp / f"{name}.share"
        assert (
            main([*cli, "recipient", "token", "create", name, "--expires", "7d", "--profile", str(profile)])
            == 0
        )
        profiles[name] = str(profile)
    return {
        "cli": cli,
        "profiles": profiles,
        "customers": uri,
        "people": str(root / "table_with_deletion_logs"),
    }


def restrict(provider: dict[str, Any], table: str, *args: str) -> int:
    return main([*provider["cli"], "share", "restrict", "partners", f"sales/{table}", *args])


def direct(uri: str, version: int | None = None) -> pd.DataFrame:
    """The provider's own read of the whole table."""
    path = Path(uri)
    if path.name == "table_with_deletion_logs":  # deltalake cannot apply deletion vectors
        storage = LocalStorage(path.parent.parent, UrlSigner(b"k" * 32, "http://unused"))
        reader = LogReader(storage, path.parent.name, path.name)
        listing = reader.listing()
        adds = list(reader.replay(listing, listing.latest_version).files())
        return read_with_deletion_vectors(path, adds).to_pandas()
    return DeltaTable(uri, version=version).to_pandas()


def canonical(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(key).reset_index(drop=True)


def signed_files(profile: str, table: str, body: dict[str, Any], delta: bool = False) -> list[dict[str, Any]]:
    """Every file line the server answers `/query` (or, with `startingVersion`, a change read) with."""
    settings = json.loads(Path(profile).read_text())
    headers = {"Authorization": f"Bearer {settings['bearerToken']}"}
    if delta:
        headers["delta-sharing-capabilities"] = "responseformat=delta;readerfeatures=deletionvectors"
    url = f"{settings['endpoint']}/shares/partners/schemas/sales/tables/{table}/query"
    answer = httpx.post(url, json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    lines = [json.loads(line) for line in answer.text.splitlines()]
    return [line for line in lines if set(line) & {"file", "add", "cdf", "remove"}]


def raw_rows(lines: list[dict[str, Any]]) -> list[pa.Table]:
    """Each signed file downloaded and read as it is, deletion vectors ignored."""
    tables = []
    for line in lines:
        body = next(iter(line.values()))
        if "deltaSingleAction" in body:
            action = next(iter(body["deltaSingleAction"].values()))
            url = action["path"]
        else:
            url = body["url"]
        got = httpx.get(url, timeout=60)
        assert got.status_code == 200
        tables.append(pq.read_table(io.BytesIO(got.content)))
    return tables


def test_a_row_and_column_restriction_per_recipient_is_exact_in_both_formats(
    provider: dict[str, Any],
) -> None:
    where = "acctbal > 100 AND nation = CURRENT_RECIPIENT('nation')"
    assert restrict(provider, "customers", "--where", where, "--columns", "custkey,name,nation,acctbal") == 0
    whole = direct(provider["customers"])
    for recipient, nation in [("acme", "JAPAN"), ("bolt", "PERU")]:
        expected = whole[(whole.acctbal > 100) & (whole.nation == nation)][
            ["custkey", "name", "nation", "acctbal"]
        ]
        assert len(expected) > 3
        url = f"{provider['profiles'][recipient]}#partners.sales.customers"
        for delta_format in (False, True):
            shared = delta_sharing.load_as_pandas(url, use_delta_format=delta_format)
            assert sorted(shared.columns) == sorted(expected.columns)
            pd.testing.assert_frame_equal(
                canonical(shared, "custkey"), canonical(expected, "custkey"), check_dtype=False
            )
            lines = signed_files(provider["profiles"][recipient], "customers", {}, delta=delta_format)
            assert lines
            for rows in raw_rows(lines):
                assert set(rows.column_names) <= {"custkey", "name", "nation", "acctbal"}
                assert "ssn" not in rows.column_names and "region" not in rows.column_names
                frame = rows.to_pandas()
                assert (frame.nation == nation).all() and (frame.acctbal > 100).all()
        # The schema a recipient sees has the served columns only.
        client = delta_sharing.SharingClient(provider["profiles"][recipient])
        assert [t.name for t in client.list_all_tables()] == ["customers", "people"]


def test_a_recipient_without_the_property_gets_a_clear_refusal_and_no_file(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "nation = CURRENT_RECIPIENT('nation')") == 0
    settings = json.loads(Path(provider["profiles"]["nobody"]).read_text())
    answer = httpx.post(
        f"{settings['endpoint']}/shares/partners/schemas/sales/tables/customers/query",
        json={}, headers={"Authorization": f"Bearer {settings['bearerToken']}"},
    )  # fmt: skip
    assert answer.status_code == 403
    assert "no property 'nation'" in answer.json()["message"]
    assert "url" not in answer.text


def test_a_partition_filter_serves_whole_files_as_they_are(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "region = 'emea'") == 0
    whole = direct(provider["customers"])
    shared = delta_sharing.load_as_pandas(f"{provider['profiles']['acme']}#partners.sales.customers")
    expected = whole[whole.region == "emea"]
    pd.testing.assert_frame_equal(
        canonical(shared, "custkey"), canonical(expected, "custkey"), check_dtype=False
    )
    lines = signed_files(provider["profiles"]["acme"], "customers", {})
    table = DeltaTable(provider["customers"])
    originals = {Path(p).name for p in table.file_uris()}
    for line in lines:
        assert line["file"]["partitionValues"] == {"region": "emea"}
        # Served as they are: the table's own files, not derived ones.
        assert Path(httpx.URL(line["file"]["url"]).path).name in originals


def test_time_travel_and_changes_are_restricted_too(provider: dict[str, Any]) -> None:
    assert (
        restrict(provider, "customers", "--where", "nation = 'JAPAN'", "--columns", "custkey,nation,acctbal")
        == 0
    )
    url = f"{provider['profiles']['acme']}#partners.sales.customers"
    first = direct(provider["customers"], version=0)
    shared = delta_sharing.load_as_pandas(url, version=0)
    expected = first[first.nation == "JAPAN"][["custkey", "nation", "acctbal"]]
    pd.testing.assert_frame_equal(
        canonical(shared, "custkey"), canonical(expected, "custkey"), check_dtype=False
    )
    changes = delta_sharing.load_table_changes_as_pandas(url, starting_version=0)
    assert set(changes.nation) == {"JAPAN"}
    assert "ssn" not in changes.columns and "name" not in changes.columns
    deletes = changes[changes._change_type == "delete"]
    before = direct(provider["customers"], version=1)  # the version the delete removed rows from
    removed = set(before.custkey[(before.custkey % 7 == 0) & (before.nation == "JAPAN")])
    assert set(deletes.custkey) == removed
    for rows in raw_rows(signed_files(provider["profiles"]["acme"], "customers", {"startingVersion": 0})):
        assert set(rows.column_names) <= {"custkey", "nation", "acctbal", "_change_type"}
        assert set(rows.column("nation").to_pylist()) <= {"JAPAN"}


def test_deletion_vectors_of_the_source_are_applied_before_filtering(provider: dict[str, Any]) -> None:
    assert restrict(provider, "people", "--where", "age > 30", "--columns", "id,name,age") == 0
    whole = direct(provider["people"])
    expected = whole[whole.age > 30][["id", "name", "age"]]
    url = f"{provider['profiles']['acme']}#partners.sales.people"
    for delta_format in (False, True):
        shared = delta_sharing.load_as_pandas(url, use_delta_format=delta_format)
        pd.testing.assert_frame_equal(canonical(shared, "id"), canonical(expected, "id"), check_dtype=False)
    lines = signed_files(provider["profiles"]["acme"], "people", {}, delta=True)
    for line in lines:
        action = line["file"]["deltaSingleAction"]["add"]
        assert "deletionVector" not in action  # no vector hides a filtered row
    raw = pd.concat([rows.to_pandas() for rows in raw_rows(lines)])
    # Read raw, the files hold exactly the rows the recipient may see: deleted ones are gone too.
    pd.testing.assert_frame_equal(canonical(raw, "id"), canonical(expected, "id"), check_dtype=False)


def test_clearing_a_restriction_serves_the_whole_table_at_once(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "nation = 'PERU'") == 0
    url = f"{provider['profiles']['acme']}#partners.sales.customers"
    assert set(delta_sharing.load_as_pandas(url).nation) == {"PERU"}
    assert restrict(provider, "customers", "--clear") == 0
    assert len(delta_sharing.load_as_pandas(url)) == len(direct(provider["customers"]))


def test_bad_restrictions_are_one_error_line_and_change_nothing(
    provider: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert restrict(provider, "customers", "--where", "nation = 'FRANCE'") == 0
    capsys.readouterr()
    for args, message in [
        (["--where", "secret > 1"], "no column 'secret'"),
        (["--where", "acctbal > 'abc'"], "cannot be compared"),
        (["--where", "DROP TABLE x"], "invalid --where"),
        (["--columns", "custkey,nope"], "no column 'nope'"),
    ]:
        assert restrict(provider, "customers", *args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and message in err and "\n" not in err
    url = f"{provider['profiles']['acme']}#partners.sales.customers"
    assert set(delta_sharing.load_as_pandas(url).nation) == {"FRANCE"}  # the last good one holds


def test_spark_through_our_source_reads_the_restricted_rows(provider: dict[str, Any], spark: Any) -> None:
    where = "nation = CURRENT_RECIPIENT('nation') AND acctbal >= 50"
    assert restrict(provider, "customers", "--where", where, "--columns", "custkey,nation,acctbal") == 0
    url = f"{provider['profiles']['bolt']}#partners.sales.customers"
    frame = spark.read.format("deltaSharing").load(url).toPandas()
    whole = direct(provider["customers"])
    expected = whole[(whole.nation == "PERU") & (whole.acctbal >= 50)][["custkey", "nation", "acctbal"]]
    assert sorted(frame.columns) == sorted(expected.columns)
    pd.testing.assert_frame_equal(
        canonical(frame, "custkey"), canonical(expected, "custkey"), check_dtype=False
    )
    pushed = spark.read.format("deltaSharing").option("pushFilters", "true").load(url).where("acctbal > 200")
    assert set(pushed.toPandas().custkey) == set(expected.custkey[expected.acctbal > 200])


def test_a_derivation_longer_than_the_budget_is_a_503_with_retry_after_and_never_a_part(
    provider: dict[str, Any], server: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from share_store.restrictions import derivation, derivation_tasks, restricted_reader

    release = threading.Event()
    slow = derivation.derive

    def held(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        return slow(*args, **kwargs)

    monkeypatch.setattr(derivation_tasks, "derive", held)
    monkeypatch.setattr(restricted_reader, "ANSWER_BUDGET_SECONDS", 0.5)
    monkeypatch.setattr(restricted_reader.RestrictedReader.__init__, "__defaults__", (0.5,))
    # A restriction never derived before: its files must all be made.
    assert restrict(provider, "customers", "--where", "acctbal < 321", "--columns", "custkey,acctbal") == 0
    settings = json.loads(Path(provider["profiles"]["acme"]).read_text())
    url = f"{settings['endpoint']}/shares/partners/schemas/sales/tables/customers/query"
    headers = {"Authorization": f"Bearer {settings['bearerToken']}"}
    pending = httpx.post(url, json={}, headers=headers, timeout=30)
    assert pending.status_code == 503, pending.text
    assert pending.headers["retry-after"] == "5"
    assert pending.json()["errorCode"] == "TEMPORARILY_UNAVAILABLE" and "retry" in pending.json()["message"]
    assert "url" not in pending.text
    release.set()
    for _ in range(100):  # the work went on meanwhile: the answer comes whole once it is done
        answer = httpx.post(url, json={}, headers=headers, timeout=30)
        if answer.status_code == 200:
            break
        time.sleep(0.2)
    assert answer.status_code == 200
    whole = direct(provider["customers"])
    shared = delta_sharing.load_as_pandas(f"{provider['profiles']['acme']}#partners.sales.customers")
    assert sorted(shared.custkey) == sorted(whole.custkey[whole.acctbal < 321])


def test_a_property_changed_or_removed_takes_effect_on_the_next_request(provider: dict[str, Any]) -> None:
    assert restrict(provider, "customers", "--where", "nation = CURRENT_RECIPIENT('nation')") == 0
    cli, url = provider["cli"], f"{provider['profiles']['bolt']}#partners.sales.customers"
    assert set(delta_sharing.load_as_pandas(url).nation) == {"PERU"}
    assert main([*cli, "recipient", "update", "bolt", "--property", "nation=FRANCE"]) == 0
    assert set(delta_sharing.load_as_pandas(url).nation) == {"FRANCE"}
    assert main([*cli, "recipient", "update", "bolt", "--unset", "nation"]) == 0
    with pytest.raises(Exception, match="no property 'nation'"):
        delta_sharing.load_as_pandas(url)
    assert main([*cli, "recipient", "update", "bolt", "--property", "nation=PERU"]) == 0


def test_share_derive_makes_the_derived_files_on_spark_and_the_server_then_derives_nothing(
    provider: dict[str, Any], server: Deployment, tmp_path: Path, spark: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from share_store.restrictions import derivation_tasks

    config = tmp_path / "sharing.toml"
    config.write_text(
        f'[server]\ndata_dir = "{server.config.data_dir}"\n'
        f'[storage]\ntype = "local"\nroot = "{server.config.storage["root"]}"\n'
    )
    where = "nation = CURRENT_RECIPIENT('nation') AND acctbal BETWEEN 10 AND 400"
    assert restrict(provider, "customers", "--where", where, "--columns", "custkey,nation,acctbal") == 0
    capsys.readouterr()
    base = ["--config", str(config), "share", "derive", "partners", "sales/customers"]
    assert main([*base, "--dry-run"]) == 0
    planned = capsys.readouterr().out
    assert "acme: 2 file(s)" in planned and "bolt: 2 file(s)" in planned
    assert "nobody: skipped: recipient 'nobody' has no property 'nation'" in planned
    assert main([*base, "--recipient", "acme", "--master", "local[2]"]) == 0
    assert "Derived " in capsys.readouterr().out
    assert main([*base, "--recipient", "acme"]) == 0
    assert "Nothing to derive" in capsys.readouterr().out  # all in the cache now
    # The server finds every file Spark made: serving acme derives nothing.
    made = []
    monkeypatch.setattr(derivation_tasks, "derive", lambda *a, **k: made.append(a))
    shared = delta_sharing.load_as_pandas(f"{provider['profiles']['acme']}#partners.sales.customers")
    assert made == []
    whole = direct(provider["customers"])
    expected = whole[(whole.nation == "JAPAN") & whole.acctbal.between(10, 400)]
    assert sorted(shared.custkey) == sorted(expected.custkey)
    assert main(["--server", server.server.url, "--admin-token", ADMIN_TOKEN, *base[2:]]) == 2
    assert "without --server" in capsys.readouterr().err
