"""Share metadata (issue 51) through the CLI (on the store and with `--server`) and the admin API:
set, shown, cleared, unset, audited; every limit and every hostile input one clear error (a 400
through the API, status 2 from the CLI), and nothing changed."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from share_store.model import Share
from share_store.persistence import ShareStore
from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, Deployment


def run(config: Path, *args: str) -> int:
    return main(["--config", str(config), *args])


def store_of(config: Path) -> ShareStore:
    return ShareStore(f"sqlite:///{config.parent / 'data' / 'store.db'}")


def metadata_of(share: Share) -> tuple[str | None, str | None, dict[str, str]]:
    return share.display_name, share.comment, dict(share.properties)


def kept_share(config: Path, name: str) -> Share:
    store = store_of(config)
    try:
        return store.get_share(name)
    finally:
        store.close()


# -- the CLI on the store --------------------------------------------------------------------


def test_the_cli_sets_shows_clears_and_unsets_metadata(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run(config, "share", "create", "s", "--display-name", "Sales EU", "--comment", "Quarterly\nsales",
            "--property", "team=sales", "--property", "tier=a=b")
        == 0
    )  # fmt: skip
    assert metadata_of(kept_share(config, "s")) == (
        "Sales EU",
        "Quarterly\nsales",
        {"team": "sales", "tier": "a=b"},
    )
    capsys.readouterr()
    assert run(config, "share", "info", "s") == 0
    info = capsys.readouterr().out
    assert "display name: Sales EU" in info and "team=sales" in info and "tier=a=b" in info
    assert "comment: Quarterly\n  sales" in info
    assert run(config, "share", "list") == 0
    listed = capsys.readouterr().out
    assert listed.startswith("s\t0 table(s)") and "display name: Sales EU" in listed
    # Update: metadata alone (no --add/--remove), set and unset in one change.
    assert (
        run(config, "share", "update", "s", "--comment", "new", "--property", "x=1", "--unset", "tier") == 0
    )
    assert metadata_of(kept_share(config, "s")) == ("Sales EU", "new", {"team": "sales", "x": "1"})
    # "" clears.
    assert run(config, "share", "update", "s", "--display-name", "", "--comment", "") == 0
    assert metadata_of(kept_share(config, "s")) == (None, None, {"team": "sales", "x": "1"})
    capsys.readouterr()
    assert run(config, "share", "info", "s") == 0
    info = capsys.readouterr().out
    assert "display name" not in info and "comment" not in info
    # Audited as the CLI's admin events, with what was set.
    store = store_of(config)
    try:
        events = store.recent_admin_events(datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC))
    finally:
        store.close()
    changes = [e for e in events if e["path"] == "/admin/v1/shares/s"]
    assert changes and changes[0]["client"] == "cli" and changes[0]["method"] == "PATCH"
    assert "display name cleared" in changes[0]["detail"] and "comment cleared" in changes[0]["detail"]
    created = [e for e in events if e["path"] == "/admin/v1/shares"]
    assert created and "Sales EU" in created[0]["detail"] and "team=sales" in created[0]["detail"]


HOSTILE_CLI = [
    (["--display-name", "d" * 256], "display name is 256 characters; at most 255"),
    (["--display-name", "two\nlines"], "control character"),
    (["--comment", "c" * 65_537], "comment is 65537 characters; at most 65536"),
    (["--comment", "\x1b]0;pwned\x07"], "control character"),
    ([arg for i in range(51) for arg in ("--property", f"k{i}=v")], "at most 50 properties"),
    (["--property", "k" * 256 + "=v"], "at most 255"),
    (["--property", "novalue"], "expected KEY=VALUE"),
    (["--property", "=v"], "property key '' is empty"),
    (["--property", "a=1", "--property", "a=2"], "given twice"),
    (["--property", "k=" + "v" * 65_537], "at most 65536"),
]


@pytest.mark.parametrize(("args", "message"), HOSTILE_CLI)
def test_a_bad_cli_value_is_one_error_line_and_nothing_changes(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert run(config, "share", "create", "s", "--display-name", "Kept", "--property", "a=0") == 0
    capsys.readouterr()
    assert run(config, "share", "create", "other", *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert run(config, "share", "update", "s", *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert metadata_of(kept_share(config, "s")) == ("Kept", None, {"a": "0"})
    store = store_of(config)
    try:
        assert [share.name for share in store.list_shares()] == ["s"]
    finally:
        store.close()


def test_an_update_of_nothing_or_of_a_missing_property_is_refused(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(config, "share", "create", "s") == 0
    capsys.readouterr()
    assert run(config, "share", "update", "s") == 2
    assert "nothing to do" in capsys.readouterr().err
    assert run(config, "share", "update", "s", "--unset", "missing") == 2
    assert "share 's' has no property 'missing' to unset" in capsys.readouterr().err
    assert run(config, "share", "update", "nope", "--comment", "x") == 2
    assert "not found" in capsys.readouterr().err


# -- the admin API and `--server` ------------------------------------------------------------


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    return {"SHARING_LIMITS_PER_TOKEN_RPS": "0"}


def admin(server: Deployment, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", **kwargs.pop("headers", {})}
    return httpx.request(method, f"{server.server.url}/admin/v1{path}", headers=headers, **kwargs)


def admin_events(server: Deployment, path: str, count: int = 1) -> list[dict[str, Any]]:
    """The admin events of `path`, waiting for `count` of them (the recorder writes them behind)."""
    deadline = time.monotonic() + 10
    while True:
        now = datetime.now(UTC)
        found = [e for e in server.store.recent_admin_events(now - timedelta(hours=1), now + timedelta(1))
                 if e["path"] == "/admin/v1" + path]  # fmt: skip
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_the_api_creates_shows_patches_and_audits_metadata(server: Deployment) -> None:
    body = {"name": "meta", "displayName": "Meta share", "comment": "<b>bold</b>"}
    made = admin(server, "POST", "/shares", json={**body, "properties": {"a": "1", "b": "2"}})
    assert made.status_code == 201, made.text
    assert made.json()["displayName"] == "Meta share" and made.json()["properties"] == {"a": "1", "b": "2"}
    info = admin(server, "GET", "/shares/meta").json()
    assert (info["displayName"], info["comment"], info["properties"]) == (
        "Meta share",
        "<b>bold</b>",
        {"a": "1", "b": "2"},
    )
    listed = [item for item in admin(server, "GET", "/shares").json()["items"] if item["name"] == "meta"]
    assert listed[0]["displayName"] == "Meta share" and listed[0]["properties"] == {"a": "1", "b": "2"}
    patched = admin(
        server, "PATCH", "/shares/meta", json={"comment": None, "properties": {"c": "3"}, "unset": ["a"]}
    )
    assert patched.status_code == 200, patched.text
    assert (patched.json()["displayName"], patched.json()["comment"], patched.json()["properties"]) == (
        "Meta share", None, {"b": "2", "c": "3"}
    )  # fmt: skip
    assert admin(server, "PATCH", "/shares/meta", json={"displayName": ""}).json()["displayName"] is None
    share = server.store.get_share("meta")
    assert metadata_of(share) == (None, None, {"b": "2", "c": "3"})
    # Each change an admin event saying what it set.
    patches = admin_events(server, "/shares/meta", 2)
    assert [e["method"] for e in patches] == ["PATCH", "PATCH"]
    assert "display name cleared" in patches[0]["detail"]
    assert (
        "comment cleared" in patches[1]["detail"]
        and "c=3" in patches[1]["detail"]
        and "-a" in patches[1]["detail"]
    )
    # A share without any: null, null and {} in the admin API.
    plain = admin(server, "POST", "/shares", json={"name": "plainmeta"})
    assert plain.status_code == 201
    info = admin(server, "GET", "/shares/plainmeta").json()
    assert (info["displayName"], info["comment"], info["properties"]) == (None, None, {})


HOSTILE_BODIES: list[tuple[dict[str, Any], str]] = [
    ({"displayName": "d" * 256}, "display name is 256 characters; at most 255"),
    ({"displayName": "tab\there"}, "control character"),
    ({"displayName": "\u202eevil"}, "control character"),
    ({"displayName": 5}, "'displayName' must be a str"),
    ({"displayName": ["x"]}, "'displayName' must be a str"),
    ({"comment": "c" * 65_537}, "comment is 65537 characters; at most 65536"),
    ({"comment": "a\u0000b"}, "control character"),
    ({"comment": {"x": 1}}, "'comment' must be a str"),
    ({"properties": {f"k{i}": "v" for i in range(51)}}, "at most 50 properties"),
    ({"properties": {"k": 1}}, "its value must be a string"),
    ({"properties": {"k": None}}, "its value must be a string"),
    ({"properties": {"k": {"nested": "x"}}}, "its value must be a string"),
    ({"properties": ["k"]}, "'properties' must be a dict"),
    ({"properties": {"k" * 256: "v"}}, "at most 255"),
    ({"properties": {"": "v"}}, "is empty"),
    ({"properties": {"k\n": "v"}}, "control character"),
    ({"properties": {"k": "v" * 65_537}}, "at most 65536"),
    ({"properties": {f"k{i}": "v" * 50_000 for i in range(3)}}, "at most 131072"),
    ({"unset": "a"}, "'unset' must be an array"),
    ({"unset": [1]}, "'unset' must be an array"),
]


@pytest.mark.parametrize(("body", "message"), HOSTILE_BODIES)
def test_every_bad_body_is_a_400_and_nothing_changes(
    server: Deployment, body: dict[str, Any], message: str
) -> None:
    name = "guarded"
    if not any(s.name == name for s in server.store.list_shares()):
        assert (
            admin(
                server,
                "POST",
                "/shares",
                json={"name": name, "displayName": "Kept", "properties": {"a": "0"}},
            ).status_code
            == 201
        )
    if "unset" not in body:
        made = admin(server, "POST", "/shares", json={"name": "refused", **body})
        assert made.status_code == 400 and message in made.json()["message"], made.text
        assert made.json()["errorCode"] in ("INVALID_PARAMETER_VALUE", "MALFORMED_REQUEST")
        assert all(s.name != "refused" for s in server.store.list_shares())
    patched = admin(server, "PATCH", f"/shares/{name}", json=body)
    assert patched.status_code == 400 and message in patched.json()["message"], patched.text
    assert metadata_of(server.store.get_share(name)) == ("Kept", None, {"a": "0"})


def test_a_huge_body_and_a_missing_share_are_refused_cleanly(server: Deployment) -> None:
    huge = admin(server, "PATCH", "/shares/nope", content=b'{"comment": "' + b"c" * 2_000_000 + b'"}',
                 headers={"Content-Type": "application/json"})  # fmt: skip
    assert huge.status_code == 413, huge.text
    assert admin(server, "PATCH", "/shares/nope", json={"comment": "x"}).status_code == 404
    assert admin(server, "PATCH", "/shares/nope", json={}).status_code in (400, 404)
    not_json = admin(
        server, "PATCH", "/shares/nope", content=b"[1, 2]", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code == 400


def test_the_cli_with_server_sets_shows_and_clears(
    server: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(*args: str) -> int:
        return main(["--server", server.server.url, "--admin-token", ADMIN_TOKEN, *args])

    assert (
        cli("share", "create", "remote", "--display-name", "Remote", "--property", "k=v", "--comment", "c")
        == 0
    )
    assert metadata_of(server.store.get_share("remote")) == ("Remote", "c", {"k": "v"})
    capsys.readouterr()
    assert cli("share", "info", "remote") == 0
    info = capsys.readouterr().out
    assert "display name: Remote" in info and "comment: c" in info and "k=v" in info
    assert cli("share", "list") == 0
    assert "display name: Remote" in capsys.readouterr().out
    assert cli("share", "update", "remote", "--display-name", "", "--unset", "k", "--property", "n=1") == 0
    assert metadata_of(server.store.get_share("remote")) == (None, "c", {"n": "1"})
    assert cli("share", "update", "remote", "--display-name", "x" * 256) == 2
    assert "at most 255" in capsys.readouterr().err
    assert cli("share", "update", "remote", "--unset", "gone") == 2
    assert "no property 'gone'" in capsys.readouterr().err
    assert cli("share", "update", "remote") == 2
    assert "nothing to do" in capsys.readouterr().err
    assert metadata_of(server.store.get_share("remote")) == (None, "c", {"n": "1"})
