"""The libraries whose internals the code reaches into still hold them, pinned to the minor version tested.

pyiceberg 0.11.1 satisfied `>=0.9` and answered every Iceberg `/query` with a 500
(`DataScan` had no `_manifest_planner` yet). Each library below is used through
private names (INTERNALS, each with where the code uses it); each name must still be
in the installed version, and the library's range in pyproject.toml must hold that
version (the one the tests ran) and stop before the next minor one.
"""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@dataclass(frozen=True)
class Internal:
    """A private name of a library the code uses: `owner` (`module` or `module:Class`) holds it."""

    library: str  # the distribution, as pyproject.toml names it
    owner: str
    name: str
    user: str  # the file of the code that uses it
    #: Set by the owner's `__init__` on each instance, so looked for in the class's source: a class
    #: attribute is looked up on the class itself.
    instance: bool = False

    def __str__(self) -> str:
        return f"{self.owner}.{self.name}"


PLANNING = "share_store/iceberg/planning.py"
COMMITS = "share_store/catalog/commits.py"
PARQUET_BOUNDS = "share_store/parquet_bounds.py"
FILES = "sharing_server/http/files.py"
COMPACTION_COMMIT = "share_store/catalog/maintenance/compaction/commit.py"
COMPACTION_REWRITE = "share_store/catalog/maintenance/compaction/rewrite.py"

#: Every private name of a library that the code uses (SQLAlchemy's `Row._mapping` and
#: `Row._asdict` are its documented Row API, underscored not to clash with column names, and are
#: not here; nor is the standard library's `sys._getframe`).
INTERNALS = [
    Internal("pyiceberg", "pyiceberg.table:DataScan", "_manifest_planner", PLANNING),
    Internal("pyiceberg", "pyiceberg.table:DataScan", "_should_use_server_side_planning", PLANNING),
    Internal("pyiceberg", "pyiceberg.catalog:MetastoreCatalog", "_parse_metadata_version", COMMITS),
    Internal("pyiceberg", "pyiceberg.catalog:MetastoreCatalog", "_empty_table_metadata", COMMITS),
    Internal(
        "pyiceberg", "pyiceberg.table.metadata:TableMetadataUtil", "_construct_without_validation", COMMITS
    ),
    Internal("pyiceberg", "pyiceberg.table.update", "_apply_table_update", COMMITS),
    Internal("pyiceberg", "pyiceberg.table.update", "_TableMetadataUpdateContext", COMMITS),
    Internal("pyiceberg", "pyiceberg.table.update", "_update_table_metadata_log", COMMITS),
    Internal("pyiceberg", "pyiceberg.io.pyarrow", "_combine_positional_deletes", PARQUET_BOUNDS),
    Internal("pyiceberg", "pyiceberg.io.pyarrow", "_get_column_projection_values", PARQUET_BOUNDS),
    Internal("pyiceberg", "pyiceberg.io.pyarrow", "_to_requested_schema", PARQUET_BOUNDS),
    Internal("pyiceberg", "pyiceberg.io.pyarrow", "_read_all_delete_files", PARQUET_BOUNDS),
    Internal(
        "pyiceberg", "pyiceberg.manifest:ManifestWriterV2", "_meta", "share_store/iceberg/delete_manifests.py"
    ),
    Internal(
        "pyiceberg",
        "pyiceberg.catalog.rest:RestCatalog",
        "_create_session",
        "share_store/table_sources/rest_session.py",
    ),
    Internal(
        "pyiceberg", "pyiceberg.catalog:Catalog", "_load_file_io", "share_store/table_sources/hadoop.py"
    ),
    # Compaction commits its `replace` with pyiceberg's overwrite producer (0.12 has no rewrite of
    # data files): the hooks it overrides or calls, the state it reads, the validations it runs.
    Internal("pyiceberg", "pyiceberg.table.update.snapshot", "_OverwriteFiles", COMPACTION_COMMIT),
    *(
        Internal("pyiceberg", "pyiceberg.table.update.snapshot:_OverwriteFiles", name, COMPACTION_COMMIT)
        for name in (
            "_refresh_for_retry _build_manifest_evaluator _manifests _deleted_entries _summary "
            "_build_delete_files_partition_predicate _validate_required_deletes _existing_manifests "
            "_validate_concurrency"
        ).split()
    ),
    *(
        Internal(
            "pyiceberg",
            "pyiceberg.table.update.snapshot:_SnapshotProducer",
            name,
            COMPACTION_COMMIT,
            instance=True,
        )
        for name in (
            "_parent_snapshot_id _io _deleted_data_files _added_data_files _snapshot_id _compression "
            "_commit_window _starting_snapshot_id"
        ).split()
    ),
    Internal(
        "pyiceberg",
        "pyiceberg.table.update:UpdateTableMetadata",
        "_transaction",
        COMPACTION_COMMIT,
        instance=True,
    ),
    Internal("pyiceberg", "pyiceberg.table:Transaction", "_table", COMPACTION_COMMIT, instance=True),
    Internal("pyiceberg", "pyiceberg.table.update.validate", "_added_delete_files", COMPACTION_COMMIT),
    Internal("pyiceberg", "pyiceberg.table.update.validate", "_validate_data_files_exist", COMPACTION_COMMIT),
    Internal("pyiceberg", "pyiceberg.io.pyarrow", "_to_requested_schema", COMPACTION_REWRITE),
    Internal("starlette", "starlette.responses:FileResponse", "_handle_simple", FILES),
    Internal("starlette", "starlette.responses:FileResponse", "_handle_single_range", FILES),
    Internal("starlette", "starlette.responses:FileResponse", "_parse_range_header", FILES),
    Internal(
        "botocore",
        "botocore.auth:S3SigV4Auth",
        "_should_sha256_sign_payload",
        "share_store/signing/request_signing.py",
    ),
    Internal(
        "delta-sharing",
        "delta_sharing.rest_client:DataSharingRestClient",
        "_session",
        "pyspark_delta_sharing/listing.py",
        instance=True,
    ),
]

#: Libraries of INTERNALS not pinned to a minor version, and why: the test of each name's presence
#: in the installed version is what guards them.
UNPINNED = {
    "botocore": "comes with boto3, which the code uses through its public API and is not pinned",
}


def owner_of(internal: Internal) -> Any:
    module, _, qualname = internal.owner.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split(".") if qualname else []:
        found = getattr(found, part)
    return found


def requirement(name: str) -> Requirement:
    project = PYPROJECT["project"]
    declared = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra
    ]
    found = [Requirement(text) for text in declared if Requirement(text).name == name]
    assert found, f"{name} is not a declared dependency"
    return found[0]


@pytest.mark.parametrize("internal", INTERNALS, ids=str)
def test_each_private_name_the_code_uses_is_in_the_installed_library(internal: Internal) -> None:
    assert re.search(rf"\b{internal.name}\b", (ROOT / internal.user).read_text()), (
        f"{internal.user} no longer uses {internal}: take it out of INTERNALS"
    )
    owner = owner_of(internal)
    if internal.instance:
        assert f"self.{internal.name} =" in inspect.getsource(owner), f"{internal} is gone"
    else:
        assert hasattr(owner, internal.name), f"{internal} is gone"


@pytest.mark.parametrize("name", sorted({i.library for i in INTERNALS} - set(UNPINNED)))
def test_a_library_used_through_its_internals_is_pinned_to_the_minor_version_tested(name: str) -> None:
    specifier = requirement(name).specifier
    installed = Version(version(name))
    assert installed in specifier, f"{name} {installed} (tested) is outside {specifier}"
    next_minor = Version(f"{installed.major}.{installed.minor + 1}.0")
    assert next_minor not in specifier, f"{name} {specifier} lets an untested {next_minor} in"


def test_pyiceberg_versions_without_the_planner_the_code_uses_are_refused() -> None:
    assert Version("0.11.1") not in requirement("pyiceberg").specifier


def test_mysql_catalogs_have_their_driver_as_an_extra() -> None:
    extra = [Requirement(text) for text in PYPROJECT["project"]["optional-dependencies"]["mysql"]]
    assert [r.name for r in extra] == ["pymysql"]
