"""Restricted tables and recipient properties through the CLI (on the store and with `--server`)
and the admin API (issue 50): set, shown, cleared, audited; every bad input one clear error, and
nothing stored."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from share_store.persistence import ShareStore
from share_store.restrictions.restriction import TableRestriction
from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, TESTDATA, Deployment, copy_testdata

#: c1 int, c2 string, c3 int; partitioned.
TABLE = "delta-2.2.0-partitioned-types"
WHERE = "c1 > 1 AND c2 = CURRENT_RECIPIENT('region')"

#: (where, columns, what the one error line says): each refused, nothing stored.
HOSTILE = [
    ("c1 + 1", None, "invalid --where"),
    ("SELECT 1", None, "invalid --where"),
    ("c1 = 1; DROP TABLE shares", None, "invalid --where"),
    ("nope = 1", None, "invalid --where"),
    ("c1 = 'abc'", None, "invalid --where"),
    ("c1 = c3", None, "invalid --where"),
    ("lower(c2) = 'a'", None, "invalid --where"),
    ("", None, "invalid --where"),
    ("c1 = 1 OR " * 2000 + "c1 = 2", None, "invalid --where"),
    (None, "c1,nope", "no column 'nope'"),
    (None, "c1,,c2", "invalid --columns"),
    (None, "c1,C1", "more than once"),
    (None, ",".join(f"x{i}" for i in range(1001)), "at most 1000"),
]


def run(config: Path, *args: str) -> int:
    return main(["--config", str(config), *args])


def store_of(config: Path) -> ShareStore:
    return ShareStore(f"sqlite:///{config.parent / 'data' / 'store.db'}")


@pytest.fixture
def shared(config: Path) -> Path:
    """Share `s` holding `d/t`, the kept partitioned table, on the CLI's local store."""
    shutil.copytree(TESTDATA / TABLE, config.parent / "buckets" / "testdata" / TABLE)
    assert run(config, "share", "create", "s", "d", f"t:delta:testdata:{TABLE}") == 0
    return config


def test_the_cli_restricts_shows_and_clears_a_table(shared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(shared, "share", "restrict", "s", "d/t", "--where", WHERE, "--columns", "C1, c2") == 0
    assert "Restricted s.d.t: where c1 > 1" in capsys.readouterr().out
    store = store_of(shared)
    try:
        # Kept with the columns as the schema spells them.
        assert store.get_table("s", "d", "t").restriction == TableRestriction(WHERE, ("c1", "c2"))
        events = store.recent_admin_events(datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC))
        assert events[0]["client"] == "cli" and events[0]["method"] == "PUT"
        assert events[0]["path"] == "/admin/v1/shares/s/schemas/d/tables/t/restriction"
        assert "CURRENT_RECIPIENT('region')" in events[0]["detail"]
    finally:
        store.close()
    assert run(shared, "share", "info", "s") == 0
    assert f"restricted: where {WHERE}; columns c1,c2" in capsys.readouterr().out
    assert run(shared, "share", "restrict", "s", "d/t", "--columns", "c3") == 0
    assert run(shared, "share", "restrict", "s", "d/t", "--clear") == 0
    assert "whole table" in capsys.readouterr().out
    assert run(shared, "share", "info", "s") == 0
    assert "restricted" not in capsys.readouterr().out


@pytest.mark.parametrize(("where", "columns", "message"), HOSTILE)
def test_a_bad_restriction_is_one_error_line_and_nothing_is_stored(
    shared: Path, capsys: pytest.CaptureFixture[str], where: str | None, columns: str | None, message: str
) -> None:
    assert run(shared, "share", "restrict", "s", "d/t", "--where", "c1 = 1") == 0
    capsys.readouterr()
    args = [*(["--where", where] if where is not None else []), *(["--columns", columns] if columns else [])]
    assert run(shared, "share", "restrict", "s", "d/t", *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    store = store_of(shared)
    try:
        assert store.get_table("s", "d", "t").restriction == TableRestriction("c1 = 1")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["s", "d/nope", "--where", "c1 = 1"], "does not exist"),
        (["nope", "d/t", "--where", "c1 = 1"], "not found"),
        (["s", "d/t"], "nothing to do"),
        (["s", "d/t", "--clear", "--where", "c1 = 1"], "--clear"),
        (["s", "dt", "--where", "c1 = 1"], "SCHEMA/NAME"),
    ],
)
def test_a_restrict_of_no_table_or_of_nothing_is_refused(
    shared: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert run(shared, "share", "restrict", *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err


def test_a_restriction_of_a_table_not_written_yet_cannot_be_checked(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(config, "share", "create", "s", "d", "t:delta:testdata:later", "--no-check") == 0
    assert run(config, "share", "restrict", "s", "d/t", "--where", "c1 = 1") == 2
    assert "cannot read table d/t to check the restriction" in capsys.readouterr().err


def test_recipient_properties_through_the_cli(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(config, "recipient", "create", "acme", "--property", "nation=JAPAN", "--property", "tier=gold")
        == 0
    )
    assert run(config, "recipient", "update", "acme", "--property", "k=v=w", "--unset", "tier") == 0
    capsys.readouterr()
    assert run(config, "recipient", "info", "acme") == 0
    assert "properties: k=v=w, nation=JAPAN" in capsys.readouterr().out
    assert run(config, "recipient", "list") == 0
    assert "properties: k=v=w, nation=JAPAN" in capsys.readouterr().out
    for args, message in (
        (["update", "acme", "--property", "bad key=1"], "invalid property key"),
        (["update", "acme", "--property", "novalue"], "expected KEY=VALUE"),
        (["update", "acme", "--unset", "missing"], "no property 'missing'"),
        (["update", "acme"], "nothing to do"),
        (["update", "acme", "--property", "k=" + "v" * 1025], "at most 1024"),
        (["create", "other", "--property", "a=1", "--property", "a=2"], "given twice"),
    ):
        assert run(config, "recipient", *args) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err, err
    store = store_of(config)
    try:
        assert store.get_recipient("acme").properties == {"k": "v=w", "nation": "JAPAN"}
        assert [r.name for r in store.list_recipients()] == ["acme"]
    finally:
        store.close()


def test_the_console_script_refuses_a_bad_restriction_with_status_2(shared: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sharing_server", "--config", str(shared),
         "share", "restrict", "s", "d/t", "--where", "c1 = 'x'"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: invalid --where") and done.stderr.count("\n") == 1


# -- the admin API and `--server` --------------------------------------------------------------


def admin(server: Deployment, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    return httpx.request(method, f"{server.server.url}/admin/v1{path}", headers=headers, **kwargs)


RESTRICTION = "/shares/api/schemas/d/tables/t/restriction"


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    return {"SHARING_LIMITS_PER_TOKEN_RPS": "0"}


@pytest.fixture(scope="module")
def api_share(server: Deployment) -> str:
    copy_testdata(server, TABLE)
    server.share_tables("api", {"t": TABLE}, schema="d")
    return "api"


def test_the_api_sets_shows_and_clears_a_restriction(server: Deployment, api_share: str) -> None:
    answer = admin(server, "PUT", RESTRICTION, json={"where": WHERE, "columns": ["c1", "C2"]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["restriction"] == {"where": WHERE, "columns": ["c1", "c2"]}
    info = admin(server, "GET", "/shares/api").json()
    assert info["tables"][0]["restriction"] == {"where": WHERE, "columns": ["c1", "c2"]}
    # The admin event carries the restriction's text.
    deadline = time.monotonic() + 10
    events: list[dict] = []
    while time.monotonic() < deadline:
        now = datetime.now(UTC)
        events = [e for e in server.store.recent_admin_events(now - timedelta(hours=1), now + timedelta(1))
                  if e["path"] == "/admin/v1" + RESTRICTION]  # fmt: skip
        if events:
            break
        time.sleep(0.1)
    assert events and events[0]["method"] == "PUT" and WHERE in events[0]["detail"]
    assert admin(server, "DELETE", RESTRICTION).json()["restriction"] is None
    assert admin(server, "GET", "/shares/api").json()["tables"][0]["restriction"] is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"where": "c1 = 'abc'"}, "invalid --where"),
        ({"where": "nope > 1"}, "invalid --where"),
        ({"where": "c1 > 1 AND (SELECT 1)"}, "invalid --where"),
        ({"where": "x" * 20000}, "longer than"),
        ({"columns": ["c1", "nope"]}, "no column 'nope'"),
        ({"columns": "c1"}, "'columns' must be an array"),
        ({"columns": []}, "'columns' must be a non-empty array"),
        ({"where": 5}, "'where' must be a str"),
        ({}, "nothing to do"),
    ],
)
def test_a_bad_restriction_through_the_api_is_a_400_and_nothing_is_stored(
    server: Deployment, api_share: str, body: dict, message: str
) -> None:
    answer = admin(server, "PUT", RESTRICTION, json=body)
    assert answer.status_code == 400 and message in answer.json()["message"], answer.text
    assert server.store.get_table("api", "d", "t").restriction is None


def test_a_restriction_of_a_table_not_shared_is_a_404(server: Deployment, api_share: str) -> None:
    assert (
        admin(
            server, "PUT", "/shares/api/schemas/d/tables/nope/restriction", json={"where": "c1 = 1"}
        ).status_code
        == 404
    )
    assert (
        admin(
            server, "PUT", "/shares/nope/schemas/d/tables/t/restriction", json={"where": "c1 = 1"}
        ).status_code
        == 404
    )


def test_recipient_properties_through_the_api(server: Deployment) -> None:
    made = admin(server, "POST", "/recipients", json={"name": "apiacme", "properties": {"nation": "JAPAN"}})
    assert made.status_code == 201 and made.json()["properties"] == {"nation": "JAPAN"}
    patched = admin(
        server, "PATCH", "/recipients/apiacme", json={"properties": {"tier": "gold"}, "unset": ["nation"]}
    )
    assert patched.status_code == 200 and patched.json()["properties"] == {"tier": "gold"}
    assert admin(server, "GET", "/recipients/apiacme").json()["properties"] == {"tier": "gold"}
    for body, message in (
        ({"properties": {"bad key": "1"}}, "invalid property key"),
        ({"properties": {"k": 1}}, "object of string values"),
        ({"properties": ["k"]}, "must be a dict"),
        ({"unset": "tier"}, "must be an array"),
        ({"properties": {f"k{i}": "v" for i in range(51)}}, "at most 50"),
    ):
        answer = admin(server, "PATCH", "/recipients/apiacme", json=body)
        assert answer.status_code == 400 and message in answer.json()["message"], (body, answer.text)
    assert server.store.get_recipient("apiacme").properties == {"tier": "gold"}
    assert admin(server, "PATCH", "/recipients/nobody", json={"properties": {"a": "b"}}).status_code == 404


def test_the_cli_with_server_restricts_and_sets_properties(
    server: Deployment, api_share: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(*args: str) -> int:
        return main(["--server", server.server.url, "--admin-token", ADMIN_TOKEN, *args])

    assert cli("share", "restrict", "api", "d/t", "--where", "c3 >= 0", "--columns", "c1,c3") == 0
    assert server.store.get_table("api", "d", "t").restriction == TableRestriction("c3 >= 0", ("c1", "c3"))
    capsys.readouterr()
    assert cli("share", "info", "api") == 0
    assert "restricted: where c3 >= 0; columns c1,c3" in capsys.readouterr().out
    assert cli("share", "restrict", "api", "d/t", "--where", "c3 = 'x'") == 2
    assert capsys.readouterr().err.startswith("error: invalid --where")
    assert cli("share", "restrict", "api", "d/t", "--columns", "c1,,c3") == 2
    assert "invalid --columns" in capsys.readouterr().err
    assert cli("share", "restrict", "api", "d/t", "--clear") == 0
    assert server.store.get_table("api", "d", "t").restriction is None
    assert cli("recipient", "create", "remote", "--property", "nation=PERU") == 0
    assert cli("recipient", "update", "remote", "--property", "tier=1", "--unset", "nation") == 0
    assert server.store.get_recipient("remote").properties == {"tier": "1"}
    assert cli("recipient", "update", "remote", "--unset", "nation") == 2
    assert "no property 'nation'" in capsys.readouterr().err
