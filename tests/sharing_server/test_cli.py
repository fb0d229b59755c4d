"""Every admin command, good input and bad, through the real entry point."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from share_store.errors import AdminError, AdminNotFound
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.admin.commands import Admin
from sharing_server.cli import main, parse_duration


def run(config: Path, *args: str) -> int:
    return main(["--config", str(config), *args])


def local_storage(root: Path) -> LocalStorage:
    return LocalStorage(root, UrlSigner(b"k" * 32, "https://sharing.example.com/files"))


def store_of(config: Path) -> ShareStore:
    return ShareStore(f"sqlite:///{config.parent / 'data' / 'store.db'}")


def test_share_lifecycle(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Tables written later (--no-check); test_tables_are_checked_when_shared checks.
    assert (
        run(config, "share", "create", "test", "tpch", "orders:delta:testdelta:tpch/orders", "--no-check")
        == 0
    )
    assert (
        run(
            config,
            "share",
            "update",
            "test",
            "--no-check",
            "--add",
            "tpch:lineitem:delta:testdelta:tpch/lineitem",
            "--add",
            "sales:q1:delta:testdelta:sales/q1",
        )
        == 0
    )
    assert run(config, "share", "update", "test", "--remove", "tpch/orders") == 0
    capsys.readouterr()
    assert run(config, "share", "list") == 0
    assert capsys.readouterr().out.startswith("test\t2 table(s)")
    assert run(config, "share", "info", "TEST") == 0
    info = capsys.readouterr().out
    assert "├── sales" in info and "└── tpch" in info and "lineitem  [delta] testdelta/tpch/lineitem" in info
    assert run(config, "share", "remove", "test") == 0
    assert store_of(config).list_shares() == []


def test_token_create_writes_profile(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(config, "share", "create", "test")
    profile = tmp_path / "out" / "test.share"
    assert (
        run(
            config,
            "token",
            "create",
            "test",
            "--expires",
            "30d",
            "--description",
            "for acme",
            "--profile",
            str(profile),
        )
        == 0
    )
    output = capsys.readouterr().out
    document = json.loads(profile.read_text())
    assert document["shareCredentialsVersion"] == 1
    assert document["endpoint"] == "https://sharing.example.com/delta-sharing"
    assert document["expirationTime"].endswith("Z")
    assert document["bearerToken"] not in output  # written to the file, not the terminal
    assert stat.S_IMODE(os.stat(profile).st_mode) == 0o600
    assert store_of(config).authenticate(document["bearerToken"]).share == "test"

    assert run(config, "token", "create", "test", "--expires", "12h") == 0
    output = capsys.readouterr().out
    secret = next(line.split()[-1] for line in output.splitlines() if line.startswith("Token:"))
    token_id = next(line.split()[-1] for line in output.splitlines() if line.startswith("Token id:"))
    # The profile comes back too, ready to save, as `mc table share token create` users expect.
    printed = json.loads(output[output.index("{") :])
    assert printed["bearerToken"] == secret and printed["shareCredentialsVersion"] == 1
    assert printed["endpoint"] == "https://sharing.example.com/delta-sharing"
    assert run(config, "token", "list", "test") == 0
    listing = capsys.readouterr().out
    assert "for acme" in listing and secret not in listing and listing.count("active") == 2
    assert run(config, "token", "revoke", "test", token_id) == 0
    assert run(config, "token", "list", "test") == 0
    assert "revoked" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["share", "create", "test"],  # duplicate (created below first)
        ["share", "create", "bad name"],
        ["share", "create", "x", "orders:delta:b:p"],
        ["share", "create", "x", "tpch", "orders:delta:bucket:../../etc"],
        ["share", "create", "x", "tpch", "orders:uniform:wh:ns:t"],
        [
            "share",
            "update",
            "test",
            "--add",
            "tpch:orders:delta:bucket:p",
            "--add",
            "tpch:ORDERS:delta:bucket:q",
        ],
        ["share", "update", "test", "--remove", "tpch/nope"],
        ["share", "update", "test"],
        ["share", "update", "missing", "--remove", "a/b"],
        ["share", "info", "missing"],
        ["share", "remove", "missing"],
        ["token", "create", "missing"],
        ["token", "create", "test", "--expires", "soon"],
        ["token", "create", "test", "--expires", "0d"],
        ["token", "revoke", "test", "nope"],
    ],
)
def test_bad_input_exits_2_and_changes_nothing(
    config: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    run(config, "share", "create", "test", "tpch", "keep:delta:bucket:keep", "--no-check")
    before = [
        (s.name, [t.name for t in store_of(config).list_tables(s.name)])
        for s in store_of(config).list_shares()
    ]
    capsys.readouterr()
    assert run(config, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    after = [
        (s.name, [t.name for t in store_of(config).list_tables(s.name)])
        for s in store_of(config).list_shares()
    ]
    assert after == before


def test_admin_reports_the_stores_not_found_as_bad_admin_input(tmp_path: Path) -> None:
    # The store raises one NotFound for every caller; the CLI and the admin API share this layer.
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    admin = Admin(store, "https://sharing.example.com", lambda: None, lambda: local_storage(tmp_path))
    admin.create_share("s", [])
    cases = [
        (lambda: admin.share_info("x"), "share 'x' not found"),
        (lambda: admin.update_share("x", add=[], remove=["sc/t"]), "share 'x' not found: it does not exist"),
        (lambda: admin.update_share("s", add=[], remove=["sc/t"]), "is not in share"),
        (lambda: admin.list_tokens("x"), "does not exist"),
        (lambda: admin.rotate_token("s", "nope", "1h"), "no active token"),
        (lambda: admin.revoke_token("s", "nope"), "no active token"),
        (lambda: admin.revoke_oauth_client("s", "nope"), "no active OAuth client"),
    ]
    try:
        for call, message in cases:
            with pytest.raises(AdminNotFound, match=message):
                call()
    finally:
        store.close()


def test_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(tmp_path / "nope.toml"), "share", "list"]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\n")
    assert main(["--config", str(bad), "share", "list"]) == 2
    bad.write_text("[server]\nprot = 1\n")
    assert main(["--config", str(bad), "share", "list"]) == 2
    assert "unknown [server] settings: prot" in capsys.readouterr().err


def test_durations() -> None:
    assert parse_duration("30d").days == 30
    assert parse_duration("90m").total_seconds() == 5400
    assert parse_duration("never") is None


def test_console_script_runs(config: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sharing_server", "--config", str(config), "share", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_the_aistor_alias_form_of_a_share_name_is_accepted(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Users of `mc table share` type `minio/test`: the alias is dropped, and they are told."""
    assert run(config, "share", "create", "minio/aliased") == 0
    captured = capsys.readouterr()
    assert "alias 'minio' is ignored" in captured.err
    assert run(config, "share", "info", "minio/aliased") == 0
    assert "aliased" in capsys.readouterr().out
    assert run(config, "token", "create", "minio/aliased", "--expires", "1d") == 0
    assert "Token:" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run(config, "share", "create", "a/b/c")


def test_tables_are_checked_when_shared(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A table that is not there is refused with the configuration named; --no-check shares it anyway."""
    assert run(config, "share", "create", "s", "tpch", "orders:delta:lake:tpch/orders") == 2
    err = capsys.readouterr().err
    assert "no Delta table at lake/tpch/orders" in err and "--no-check" in err
    assert f"(configuration: --config {config})" in err and err.count("\n") == 1
    assert store_of(config).list_shares() == []  # nothing half-made
    log = config.parent / "buckets" / "lake" / "tpch" / "orders" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("{}\n")
    assert run(config, "share", "create", "s", "tpch", "orders:delta:lake:tpch/orders") == 0
    assert run(config, "share", "update", "s", "--add", "tpch:later:delta:lake:tpch/later") == 2
    assert run(config, "share", "update", "s", "--no-check", "--add", "tpch:later:delta:lake:tpch/later") == 0
    capsys.readouterr()
    assert run(config, "share", "update", "s", "--add", "tpch:t:uniform:nowhere:ns:t") == 2
    assert "no Iceberg catalog" in capsys.readouterr().err
    # An Iceberg table its catalog (the embedded `default` one here) does not have.
    assert run(config, "share", "update", "s", "--add", "tpch:t:uniform:default:ns:t") == 2
    assert "no Iceberg table ns.t in warehouse 'default'" in capsys.readouterr().err


def test_admin_itself_checks_added_tables(tmp_path: Path) -> None:
    """The check lives in `Admin`, which the CLI, the admin API and the console all call: a caller
    cannot leave it out, only ask for `check=False` (the CLI's --no-check); nothing is half-made."""
    from share_store.table_sources.registry import CatalogRegistry

    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    root = tmp_path / "buckets"
    (root / "lake" / "here" / "_delta_log").mkdir(parents=True)
    (root / "lake" / "here" / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    catalogs = CatalogRegistry({"wh": {"type": "sql", "uri": sqlite_url(tmp_path / "ice.db")}})
    admin = Admin(store, "https://sharing.example.com", lambda: catalogs, lambda: local_storage(root))
    missing = "no Delta table at lake/no/such/path: it has no _delta_log/"
    try:
        with pytest.raises(AdminError, match=missing) as refused:
            admin.create_share("s", ["sc", "good:delta:lake:here", "bad:delta:lake:no/such/path"])
        assert "--no-check" in refused.value.message and '"check": false' in refused.value.message
        assert store.list_shares() == []  # one bad table among good ones: nothing is created
        admin.create_share("s", ["sc", "good:delta:lake:here"])
        with pytest.raises(AdminError, match=missing):
            admin.update_share("s", ["sc:bad:delta:lake:no/such/path"], [])
        with pytest.raises(AdminError, match=r"no Iceberg table crm\.gone in warehouse 'wh'"):
            admin.update_share("s", ["sc:ice:uniform:wh:crm:gone"], [])
        assert [table.name for table in store.list_tables("s")] == ["good"]
        added = admin.update_share(
            "s", ["sc:bad:delta:lake:no/such/path", "sc:ice:uniform:wh:crm:gone"], [], check=False
        )
        assert added["added"] == 2
    finally:
        store.close()


def test_the_configuration_is_found_where_users_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sharing_server.cli import find_config

    monkeypatch.chdir(tmp_path)
    assert find_config(None, {})[0] is None
    (tmp_path / "sharing.toml").write_text("")
    assert find_config(None, {}) == ("sharing.toml", "./sharing.toml")
    assert find_config(None, {"SHARING_CONFIG": "/etc/s.toml"})[0] == "/etc/s.toml"
    assert find_config("given.toml", {"SHARING_CONFIG": "/etc/s.toml"})[0] == "given.toml"
