"""Named recipients against a live server: one token opens every share granted to it.

Recipients are made through the admin API and the CLI (`--server`); the real
`delta_sharing` client reads with their tokens, and with a profile fetched once
from an activation link.
"""

from __future__ import annotations

import json
from pathlib import Path

import delta_sharing
import httpx
import pytest

from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, Deployment, audit_lines, copy_testdata

TABLES = {"orders": "delta-0.8.0-partitioned", "dates": "delta-0.8.0-date", "plain": "simple_table"}


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """No per-token request limit, which the API calls here, one after another, would pass."""
    return {"SHARING_LIMITS_PER_TOKEN_RPS": "0"}


@pytest.fixture(scope="module", autouse=True)
def shares(server: Deployment) -> None:
    """Shares `north`, `south` and `west`, of one kept table each."""
    for directory in TABLES.values():
        copy_testdata(server, directory)
    for share, name in (("north", "orders"), ("south", "dates"), ("west", "plain")):
        server.share_tables(share, {name: TABLES[name]})


def admin(server: Deployment, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    return httpx.request(method, f"{server.server.url}/admin/v1{path}", headers=headers, **kwargs)


def write(tmp_path: Path, name: str, profile: dict) -> Path:
    path = tmp_path / f"{name}.share"
    path.write_text(json.dumps(profile))
    return path


def tables_of(profile: Path) -> list[str]:
    return sorted(
        f"{t.share}.{t.schema}.{t.name}" for t in delta_sharing.SharingClient(str(profile)).list_all_tables()
    )


def test_a_recipient_token_opens_every_share_granted_and_follows_grants(
    server: Deployment, tmp_path: Path
) -> None:
    assert admin(server, "POST", "/recipients", json={"name": "partner"}).status_code == 201
    for share in ("north", "south"):
        assert admin(server, "POST", "/recipients/partner/shares", json={"share": share}).status_code == 201
    issued = admin(server, "POST", "/recipients/partner/tokens", json={"expires": "1d", "description": "p"})
    assert issued.status_code == 201, issued.text
    profile = write(tmp_path, "partner", issued.json()["profile"])
    assert tables_of(profile) == ["north.default.orders", "south.default.dates"]
    shares = [s.name for s in delta_sharing.SharingClient(str(profile)).list_shares()]
    assert shares == ["north", "south"]
    assert len(delta_sharing.load_as_pandas(f"{profile}#north.default.orders")) == 7
    # Granting opens at once; revoking closes at once (404, as a share that is not there).
    assert admin(server, "POST", "/recipients/partner/shares", json={"share": "west"}).status_code == 201
    assert "west.default.plain" in tables_of(profile)
    assert admin(server, "DELETE", "/recipients/partner/shares/south").status_code == 200
    assert tables_of(profile) == ["north.default.orders", "west.default.plain"]
    headers = {"Authorization": f"Bearer {issued.json()['token']}"}
    gone = httpx.get(f"{server.endpoint}/shares/south/schemas/default/tables", headers=headers)
    assert gone.status_code == 404
    info = admin(server, "GET", "/recipients/partner").json()
    assert info["shares"] == ["north", "west"] and [t["state"] for t in info["tokens"]] == ["active"]
    # Per-share tokens are unchanged: one share each.
    assert tables_of(Path(server.profile("north"))) == ["north.default.orders"]
    # The audit line names the recipient's token and the share of the URL.
    record = audit_lines(server, lambda r: bool(r.get("recipient_id")) and r.get("share") == "north")
    assert record and record[-1]["token_id"] == issued.json()["id"]


def test_an_activation_link_serves_the_profile_once(server: Deployment, tmp_path: Path) -> None:
    admin(server, "POST", "/recipients", json={"name": "linked"})
    admin(server, "POST", "/recipients/linked/shares", json={"share": "north"})
    issued = admin(server, "POST", "/recipients/linked/tokens", json={"activation": True}).json()
    assert "token" not in issued and "profile" not in issued  # the secret only behind the link
    link = issued["activationLink"]
    assert link.startswith(server.endpoint + "/activation/")
    first = httpx.get(link)
    assert first.status_code == 200 and first.headers["cache-control"] == "no-store"
    assert "attachment" in first.headers["content-disposition"]
    profile = write(tmp_path, "linked", first.json())
    assert tables_of(profile) == ["north.default.orders"]
    again = httpx.get(link)
    assert again.status_code == 410 and "already used" in again.json()["message"]
    assert httpx.get(server.endpoint + "/activation/not-a-code").status_code == 404
    stored = server.store.engine.connect().exec_driver_sql("SELECT sealed_profile FROM activations").all()
    assert all(row[0] is None for row in stored)  # nothing of the secret kept once used


def test_the_cli_manages_recipients_and_removal_revokes_their_tokens(
    server: Deployment, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = ["--server", server.server.url, "--admin-token", ADMIN_TOKEN]
    assert main([*cli, "recipient", "create", "acme"]) == 0
    assert main([*cli, "recipient", "grant", "acme", "west"]) == 0
    profile = tmp_path / "acme.share"
    assert (
        main([*cli, "recipient", "token", "create", "acme", "--expires", "7d", "--profile", str(profile)])
        == 0
    )
    assert tables_of(profile) == ["west.default.plain"]
    capsys.readouterr()
    assert main([*cli, "recipient", "list"]) == 0
    assert "acme\tshares: west" in capsys.readouterr().out
    assert main([*cli, "recipient", "token", "create", "acme", "--expires", "never"]) == 2  # max lifetime
    assert "max_token_lifetime" in capsys.readouterr().err
    assert main([*cli, "recipient", "remove", "acme"]) == 0
    with pytest.raises(Exception, match=r"401|revoked|invalid"):
        delta_sharing.SharingClient(str(profile)).list_all_tables()


def test_bad_recipient_input_is_a_clear_4xx_and_changes_nothing(server: Deployment) -> None:
    admin(server, "POST", "/recipients", json={"name": "careful"})
    before = admin(server, "GET", "/recipients/careful").json()
    cases = [
        ("POST", "/recipients", {"name": "careful"}, 409, "already exists"),
        ("POST", "/recipients", {"name": "../x"}, 400, "invalid recipient name"),
        ("POST", "/recipients", {}, 400, "'name' must be a str"),
        ("POST", "/recipients/careful/shares", {"share": "nope"}, 404, "not found"),
        ("POST", "/recipients/nobody/shares", {"share": "north"}, 404, "recipient 'nobody' not found"),
        ("DELETE", "/recipients/careful/shares/north", None, 404, "is not granted"),
        ("POST", "/recipients/careful/tokens", {"expires": "2y"}, 400, "invalid duration"),
        ("DELETE", "/recipients/careful/tokens/nope", None, 404, "no active token"),
    ]
    for method, path, body, status, message in cases:
        answer = admin(server, method, path, json=body)
        assert answer.status_code == status, (method, path, answer.text)
        assert message in answer.json()["message"], answer.text
    admin(server, "POST", "/recipients/careful/shares", json={"share": "north"})
    again = admin(server, "POST", "/recipients/careful/shares", json={"share": "north"})
    assert again.status_code == 409 and "already granted" in again.json()["message"]
    after = admin(server, "GET", "/recipients/careful").json()
    assert after["tokens"] == before["tokens"] == [] and after["shares"] == ["north"]


def test_the_iceberg_catalog_refuses_a_recipient_token_with_the_reason(server: Deployment) -> None:
    admin(server, "POST", "/recipients", json={"name": "icy"})
    token = admin(server, "POST", "/recipients/icy/tokens", json={}).json()["token"]
    root = server.endpoint.removesuffix("/delta-sharing")
    answer = httpx.get(f"{root}/iceberg/v1/namespaces", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 403 and "one share per token" in answer.json()["error"]["message"]
