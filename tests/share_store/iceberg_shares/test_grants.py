"""`IcebergGrants`: what a recipient at `/iceberg` may read of a shared table, worked out once per
table and kept; the signer of its reads; what vended keys for it may reach. Delta tables on a real
SeaweedFS (as generated Iceberg metadata); a table on local storage is refused."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from share_store.errors import UnsupportedOperation
from share_store.iceberg_shares.grants import MAX_EXACT_FILES, IcebergGrants, TableGrant
from share_store.iceberg_shares.visible_metadata import object_location
from share_store.model import SharedTable
from share_store.readers.table_readers import TableReaders
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from testbed.seaweed import upload_tree
from tests.conftest import TESTDATA_BUCKET, Deployment

TABLE = "simple_table"  # one version of a few files: few enough to name one by one


@pytest.fixture(scope="module")
def table(s3: Deployment, testdata: Path) -> SharedTable:
    """The kept `simple_table` in the S3 store's testdata bucket, shared with its history."""
    prefix = f"grants-{uuid.uuid4().hex[:8]}/{TABLE}"
    upload_tree(s3.seaweed.client(), testdata / TABLE, TESTDATA_BUCKET, prefix)  # type: ignore[attr-defined]
    return SharedTable(
        "id-" + prefix, "s", "d", "t", "delta", TESTDATA_BUCKET, prefix, True, datetime.now(UTC)
    )


@pytest.fixture(scope="module")
def grants(s3: Deployment) -> IcebergGrants:
    return IcebergGrants(TableReaders(s3.storage))


def data_files(testdata: Path) -> list[str]:
    """Every data file in the table's folder, of any version."""
    return sorted(p.name for p in (testdata / TABLE).glob("*.parquet"))


def current_files(testdata: Path) -> list[str]:
    """The data files of the table's latest version."""
    return sorted(uri.rsplit("/", 1)[-1] for uri in DeltaTable(str(testdata / TABLE)).file_uris())


def test_a_table_on_local_storage_is_refused_with_the_reason(table: SharedTable, tmp_path: Path) -> None:
    local = IcebergGrants(TableReaders(LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://h/files"))))
    with pytest.raises(UnsupportedOperation, match="local directory"):
        local.load(table)


def test_with_history_the_grant_is_the_table_and_its_generated_metadata(
    grants: IcebergGrants, table: SharedTable, testdata: Path
) -> None:
    grant = grants.load(table)
    assert all(grant.readable.allows(TESTDATA_BUCKET, f"{table.path}/{n}") for n in data_files(testdata))
    assert grant.readable.allows(TESTDATA_BUCKET, f"{table.path}/_delta_log/00000000000000000000.json")
    assert grant.readable.allows(*object_location(grant.metadata_location))
    assert not grant.readable.allows(TESTDATA_BUCKET, f"{table.path}-other/part-0.parquet")
    assert not grant.readable.allows("elsewhere", f"{table.path}/{data_files(testdata)[0]}")
    # Keys for it reach its prefixes, not file by file: history reaches more than a file list.
    assert not grant.few_files and grant.vending_scope().objects == ()


def test_without_history_the_grant_is_the_current_versions_files_one_by_one(
    grants: IcebergGrants, table: SharedTable, testdata: Path
) -> None:
    grant = grants.load(replace(table, history_shared=False))
    current = current_files(testdata)
    assert all(grant.readable.allows(TESTDATA_BUCKET, f"{table.path}/{n}") for n in current)
    removed = sorted(set(data_files(testdata)) - set(current))
    assert removed and not any(grant.readable.allows(TESTDATA_BUCKET, f"{table.path}/{n}") for n in removed)
    assert not grant.readable.allows(TESTDATA_BUCKET, f"{table.path}/_delta_log/00000000000000000000.json")
    assert len(current) <= MAX_EXACT_FILES and grant.few_files
    scope = grant.vending_scope()
    assert {key.rsplit("/", 1)[-1] for _, key in scope.objects} >= set(current)
    assert not scope.allows(TESTDATA_BUCKET, f"{table.path}/{removed[0]}")


def test_the_metadata_shared_without_history_is_cut_to_the_current_snapshot(
    grants: IcebergGrants, table: SharedTable
) -> None:
    grant = grants.load(table)
    assert isinstance(grant, TableGrant) and len(grant.metadata["snapshots"]) > 1  # a version each
    assert grant.shared_metadata(True)["snapshots"] == grant.metadata["snapshots"]
    assert len(grant.shared_metadata(False)["snapshots"]) == 1


def test_a_read_the_grant_allows_is_signed_and_another_is_not(
    grants: IcebergGrants, table: SharedTable, testdata: Path
) -> None:
    grant = grants.load(table)
    allowed = f"{grant.endpoint}/{TESTDATA_BUCKET}/{table.path}/{data_files(testdata)[0]}"
    signed = grants.signature(table, "GET", allowed, {})
    assert signed is not None
    _, headers = signed
    assert {name.lower() for name in headers} >= {"authorization", "x-amz-date"}
    outside = f"{grant.endpoint}/{TESTDATA_BUCKET}/{table.path}-other/part-0.parquet"
    assert grants.signature(table, "GET", outside, {}) is None
    assert grants.signature(table, "GET", outside, {}, recheck=True) is None  # looked again: still not


def test_without_a_vendor_nothing_is_vended(grants: IcebergGrants) -> None:
    assert not grants.vends
