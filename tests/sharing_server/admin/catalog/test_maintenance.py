"""`sharing-server table maintenance get|set|run|status` on a real table, through the real entry point.

Each test runs twice: on the store (a temporary configuration, as `table` commands run without
`--server`) and on a live server through `--server` and its maintenance API. The table,
`db.events`, is written in APPENDS small appends with pyiceberg through the catalog (in-process on
the store; the REST catalog on the server), so that a run has files to compact.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import Table

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.table_source import WarehouseTables
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, Deployment
from tests.sharing_server.admin.catalog.test_commands import store_of

APPENDS = 5
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "v", "type": "string", "required": False},
]})  # fmt: skip
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
DEFAULTS = {
    "icebergCompaction": {
        "status": "enabled",
        "settings": {"icebergCompaction": {"targetFileSizeMB": 512, "strategy": "auto"}},
    },
    "icebergSnapshotManagement": {
        "status": "enabled",
        "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 1, "maxSnapshotAgeHours": 120}},
    },
}
UNREFERENCED = {
    "status": "enabled",
    "settings": {"icebergUnreferencedFileRemoval": {"unreferencedDays": 3, "nonCurrentDays": 10}},
}


@dataclass
class Lake:
    """A warehouse holding `db.events`, the CLI's words for it, and its pyiceberg table."""

    mode: str
    argv: list[str]  # before `table …`: the configuration, or the server and the admin token
    warehouse: str
    load: Callable[[], Table]
    capsys: pytest.CaptureFixture[str]

    def cli(self, *args: str) -> tuple[int, str, str]:
        """`sharing-server … table maintenance ARGS` ({w} is the warehouse): status, stdout, stderr."""
        self.capsys.readouterr()
        words = [arg.replace("{w}", self.warehouse) for arg in args]
        try:
            code = main([*self.argv, "table", "maintenance", *words])
        except SystemExit as exited:  # a usage error, from argparse
            code = int(exited.code or 0)
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *args: str) -> str:
        code, out, err = self.cli(*args)
        assert code == 0, err
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def data_files(self) -> list[str]:
        return sorted(task.file.file_path for task in self.load().scan().plan_files())

    def ids(self) -> list[int]:
        return sorted(self.load().scan().to_arrow()["id"].to_pylist())

    def everything(self) -> dict[str, Any]:
        """What a refused command must leave as it was: configurations, job status, the table."""
        return {
            "table": self.json("get", "{w}", "db", "events"),
            "warehouse": self.json("get", "{w}"),
            "status": self.json("status", "{w}", "db", "events"),
            "metadata": self.load().metadata_location,
            "files": self.data_files(),
        }


@pytest.fixture(params=["local", "remote"])
def lake(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> Lake:
    if request.param == "local":
        config: Path = request.getfixturevalue("config")
        argv, warehouse = ["--config", str(config)], "lake"
    else:
        server: Deployment = request.getfixturevalue("server")
        argv = ["--server", server.server.url, "--admin-token", ADMIN_TOKEN]
        warehouse = f"lake-{uuid.uuid4().hex[:8]}"  # one module-wide server: a warehouse per test
    for words in (["warehouse", "create", warehouse], ["namespace", "create", warehouse, "db"],
                  ["create", warehouse, "db", "events", "--schema", SCHEMA]):  # fmt: skip
        assert main([*argv, "table", *words]) == 0
    if request.param == "local":
        store = store_of(config)
        request.addfinalizer(store.close)
        storage = LocalStorage(config.parent / "buckets", UrlSigner(b"k" * 32, "https://x/files"))
        tables = WarehouseTables(WarehouseCatalog(store.transactions, storage), warehouse)
        load: Callable[[], Table] = lambda: tables.load_table(("db", "events"))  # noqa: E731
    else:
        uri = f"{server.server.url}/_iceberg"
        rest = RestCatalog(warehouse, uri=uri, warehouse=warehouse, token=ADMIN_TOKEN)
        load = lambda: rest.load_table(("db", "events"))  # noqa: E731
    for n in range(APPENDS):
        ids = list(range(n * 10, n * 10 + 10))
        load().append(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=ARROW))
    return Lake(request.param, argv, warehouse, load, capsys)


def test_get_shows_s3_tables_defaults_for_a_table_and_its_warehouse(lake: Lake) -> None:
    assert lake.json("get", "{w}", "db", "events") == {"table": "db.events", "configuration": DEFAULTS}
    assert lake.json("get", "{w}") == {
        "warehouse": lake.warehouse,
        "configuration": {**DEFAULTS, "icebergUnreferencedFileRemoval": UNREFERENCED},
    }
    readable = lake.ok("get", "{w}", "db", "events").splitlines()
    assert readable[0] == f"Table:     {lake.warehouse}: db.events"
    assert readable[1].split() == ["icebergCompaction", "enabled", "targetFileSizeMB=512", "strategy=auto"]
    assert readable[2].split() == [
        "icebergSnapshotManagement", "enabled", "minSnapshotsToKeep=1", "maxSnapshotAgeHours=120"
    ]  # fmt: skip
    warehouse = lake.ok("get", "{w}").splitlines()
    assert warehouse[0] == f"Warehouse: {lake.warehouse}"
    assert warehouse[3].split() == [
        "icebergUnreferencedFileRemoval", "enabled", "unreferencedDays=3", "nonCurrentDays=10"
    ]  # fmt: skip
    # mc's alias first word, ignored with a note.
    code, out, err = lake.cli("get", "myminio", "{w}", "db", "events")
    assert code == 0 and out.splitlines() == readable and "alias 'myminio' is ignored" in err


def test_set_writes_s3_tables_configurations_and_a_tables_own_wins(lake: Lake) -> None:
    out = lake.ok("set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
                  "--setting", "targetFileSizeMB=64", "--setting", "strategy=binpack")  # fmt: skip
    said, _, line = out.splitlines()
    assert said == f"Set icebergCompaction of table 'db.events' in warehouse '{lake.warehouse}'."
    assert line.split() == ["icebergCompaction", "enabled", "targetFileSizeMB=64", "strategy=binpack"]
    # The warehouse's settings are its tables' defaults; the table's own compaction still wins.
    value = {"status": "disabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 256}}}
    lake.ok("set", "{w}", "--type", "icebergCompaction", "--value", json.dumps(value))
    lake.ok("set", "{w}", "--type", "icebergSnapshotManagement", "--status", "enabled",
            "--setting", "minSnapshotsToKeep=3")  # fmt: skip
    lake.ok("set", "{w}", "--type", "icebergUnreferencedFileRemoval", "--status", "disabled")
    table = lake.json("get", "{w}", "db", "events")["configuration"]
    assert table["icebergCompaction"] == {
        "status": "enabled",
        "settings": {"icebergCompaction": {"targetFileSizeMB": 64, "strategy": "binpack"}},
    }
    assert table["icebergSnapshotManagement"]["settings"]["icebergSnapshotManagement"] == {
        "minSnapshotsToKeep": 3, "maxSnapshotAgeHours": 120,
    }  # fmt: skip
    warehouse = lake.json("get", "{w}")["configuration"]
    assert warehouse["icebergCompaction"]["status"] == "disabled"
    assert warehouse["icebergUnreferencedFileRemoval"]["status"] == "disabled"
    # Under --json, stdout is the document alone; what was set is said on stderr.
    code, out, err = lake.cli("set", "{w}", "--type", "icebergCompaction", "--status", "enabled", "--json")
    assert code == 0 and json.loads(out)["warehouse"] == lake.warehouse and err.startswith("Set ")


def test_run_compacts_the_table_and_status_tells_of_it(lake: Lake) -> None:
    status = lake.json("status", "{w}", "db", "events")["status"]
    assert {kind: job["status"] for kind, job in status.items()} == {
        "icebergCompaction": "Not_Yet_Run",
        "icebergSnapshotManagement": "Not_Yet_Run",
        "icebergUnreferencedFileRemoval": "Not_Yet_Run",
    }
    assert len(lake.data_files()) == APPENDS
    out = lake.ok("run", "{w}", "db", "events")
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert list(lines) == ["icebergCompaction", "icebergSnapshotManagement", "icebergUnreferencedFileRemoval"]
    assert all(words[0] == "Successful" for words in lines.values()), out
    assert f"files_rewritten={APPENDS}" in lines["icebergCompaction"]
    assert "files_written=1" in lines["icebergCompaction"]
    assert len(lake.data_files()) == 1
    assert lake.ids() == list(range(APPENDS * 10))

    status = lake.json("status", "{w}", "db", "events")["status"]
    assert status["icebergCompaction"]["status"] == "Successful"
    assert status["icebergCompaction"]["details"]["files_rewritten"] == APPENDS
    readable = lake.ok("status", "{w}", "db", "events").splitlines()
    assert readable[0].split()[:2] == ["icebergCompaction", "Successful"]
    assert status["icebergCompaction"]["lastRunTimestamp"][:10] in readable[0]


def test_run_does_only_the_types_named_and_says_what_it_skipped(lake: Lake) -> None:
    out = lake.ok("run", "{w}", "db", "events", "--type", "icebergSnapshotManagement")
    assert [line.split()[:2] for line in out.splitlines()] == [["icebergSnapshotManagement", "Successful"]]
    status = lake.json("status", "{w}", "db", "events")["status"]
    assert status["icebergCompaction"] == {"status": "Not_Yet_Run"}
    assert len(lake.data_files()) == APPENDS

    lake.ok("set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "disabled")
    out = lake.ok("run", "{w}", "db", "events", "--type", "icebergCompaction")
    assert out.split() == ["icebergCompaction", "not", "run", "(disabled)"]
    lake.ok("set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
            "--setting", "strategy=sort")  # fmt: skip
    ran = lake.json("run", "{w}", "db", "events", "--type", "icebergCompaction")["runs"]["icebergCompaction"]
    assert ran["status"] == "Successful"
    assert ran["message"] == "strategy 'sort' but the table has no sort order"
    assert len(lake.data_files()) == APPENDS


def test_a_failed_type_is_printed_and_the_exit_status_says_so(lake: Lake) -> None:
    Path(urlparse(lake.data_files()[0]).path).unlink()  # a data file lost under the table
    code, out, err = lake.cli("run", "{w}", "db", "events", "--type", "icebergCompaction")
    assert code == 2
    assert out.splitlines()[0].split()[:2] == ["icebergCompaction", "Failed"]
    subject = f"table 'db.events' in warehouse '{lake.warehouse}'"
    assert f"error: maintenance of {subject} failed: icebergCompaction" in err
    assert lake.json("status", "{w}", "db", "events")["status"]["icebergCompaction"]["status"] == "Failed"


SIZE = "icebergCompaction targetFileSizeMB is a whole number from 64 to 512"
NO_WAREHOUSE = "Warehouse does not exist: nowh"
BAD_INPUT = [
    (["set", "{w}", "db", "events", "--type", "icebergCompactoin", "--status", "enabled"],
     "argument --type: invalid choice: 'icebergCompactoin'"),
    (["run", "{w}", "db", "events", "--type", "compaction"], "argument --type: invalid choice: 'compaction'"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
      "--setting", "targetFileSizeMB=8"], SIZE),
    (["set", "{w}", "--type", "icebergCompaction", "--status", "enabled",
      "--setting", "targetFileSizeMB=1024"], SIZE),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
      "--setting", "targetFileSizeMB=\"128\""], "targetFileSizeMB is a whole number"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
      "--setting", "strategy=zorder"], "the compaction strategy is one of auto, binpack, sort"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
      "--setting", "targetFileSize=128"], "unknown icebergCompaction settings: targetFileSize"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled",
      "--setting", "targetFileSizeMB"], "--setting takes KEY=VALUE"),
    (["set", "{w}", "db", "events", "--type", "icebergUnreferencedFileRemoval", "--status", "enabled"],
     "a table's maintenance type is one of icebergCompaction, icebergSnapshotManagement"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--value", "{not json"],
     "--value is not valid JSON"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--value", '{"status": "on"}'],
     "status is 'enabled' or 'disabled'"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--value", '{"status": "enabled"}',
      "--setting", "strategy=sort"], "--setting goes with --status"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction"], "set takes --status enabled|disabled"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "on"],
     "argument --status: invalid choice: 'on'"),
    (["set", "{w}", "db", "events", "--type", "icebergCompaction", "--status", "enabled", "--value", "{}"],
     "not allowed with argument"),
    (["get", "{w}", "db", "nope"], "Table does not exist: db.nope"),
    (["set", "{w}", "db", "nope", "--type", "icebergCompaction", "--status", "disabled"],
     "Table does not exist: db.nope"),
    (["run", "{w}", "db", "nope"], "Table does not exist: db.nope"),
    (["status", "{w}", "nope", "events"], "Table does not exist: nope.events"),
    (["get", "nowh"], NO_WAREHOUSE),
    (["set", "nowh", "--type", "icebergCompaction", "--status", "disabled"], NO_WAREHOUSE),
    (["run", "nowh", "db", "events"], NO_WAREHOUSE),
    (["run", "{w}", "db"], "expected [ALIAS] WAREHOUSE NAMESPACE TABLE, got 2 word(s)"),
    (["get", "a", "{w}", "db", "events", "x"], "expected [ALIAS] WAREHOUSE [NAMESPACE TABLE], got 5 word(s)"),
]  # fmt: skip


def test_bad_input_is_a_clear_error_and_changes_nothing(lake: Lake) -> None:
    lake.ok("run", "{w}", "db", "events", "--type", "icebergSnapshotManagement")  # a status to keep
    before = lake.everything()
    for args, message in BAD_INPUT:
        code, out, err = lake.cli(*args)
        errors = [line for line in err.splitlines() if not line.startswith("note: ")]
        assert code == 2, (args, out, err)
        assert message in errors[-1] and errors[-1].startswith(("error: ", "sharing-server ")), (args, err)
        assert lake.everything() == before, args


def test_the_run_api_takes_the_types_to_run_and_refuses_others(server: Deployment) -> None:
    base = f"{server.server.url}/_iceberg/v1"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    warehouse = f"api-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=base, headers=headers, timeout=60) as api:
        assert api.post("/warehouses", json={"name": warehouse}).status_code == 200
        assert api.post(f"/{warehouse}/namespaces", json={"namespace": ["db"]}).status_code == 200
        table = {"name": "t", "schema": json.loads(SCHEMA)}
        created = api.post(f"/{warehouse}/namespaces/db/tables", json=table)
        assert created.status_code == 200, created.text
        path = f"/{warehouse}/namespaces/db/tables/t/maintenance/run"
        for body in ({"types": ["icebergNope"]}, {"types": []}, {"types": "icebergCompaction"},
                     {"kinds": ["icebergCompaction"]}, [1]):  # fmt: skip
            refused = api.post(path, json=body)
            assert refused.status_code == 400, (body, refused.text)
            assert refused.json()["error"]["type"] == "BadRequestException"
        status = api.get(f"/{warehouse}/namespaces/db/tables/t/maintenance-job-status").json()["status"]
        assert {job["status"] for job in status.values()} == {"Not_Yet_Run"}
        ran = api.post(path, json={"types": ["icebergUnreferencedFileRemoval"]})
        assert ran.status_code == 200 and list(ran.json()["runs"]) == ["icebergUnreferencedFileRemoval"]
        assert list(api.post(path).json()["runs"]) == [
            "icebergCompaction", "icebergSnapshotManagement", "icebergUnreferencedFileRemoval"
        ]  # fmt: skip
