"""The admin REST API, directly and through the CLI's `--server`, against a live server.

Recipients read what the API set up with the real `delta_sharing` client,
through v1 (bearer) and v2 (OAuth client credentials) profiles.
"""

from __future__ import annotations

import json
from pathlib import Path

import delta_sharing
import httpx
import pytest
from deltalake import DeltaTable

from sharing_server.cli import main
from tests.conftest import ADMIN_TOKEN, TESTDATA_BUCKET, Deployment, copy_testdata

TABLE = "delta-0.8.0-partitioned"


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """No per-token request limit, which the API calls here, one after another, would pass."""
    return {"SHARING_LIMITS_PER_TOKEN_RPS": "0"}


@pytest.fixture(scope="module", autouse=True)
def table(server: Deployment) -> None:
    """The kept table the shares made here hold, in the server's testdata bucket."""
    copy_testdata(server, TABLE)


def admin(server: Deployment, method: str, path: str, token: str = ADMIN_TOKEN, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    headers.update(kwargs.pop("headers", {}))
    return httpx.request(method, f"{server.server.url}/admin/v1{path}", headers=headers, **kwargs)


def cli(server: Deployment, *args: str) -> int:
    return main(["--server", server.server.url, "--admin-token", ADMIN_TOKEN, *args])


def expected_rows(testdata: Path):
    return DeltaTable(str(testdata / TABLE)).to_pandas()


def same_rows(left, right) -> None:
    columns = sorted(left.columns)
    left = left[columns].sort_values(columns).reset_index(drop=True)
    right = right[columns].sort_values(columns).reset_index(drop=True)
    assert left.astype(str).equals(right.astype(str))


def test_admin_api_needs_its_own_token(server: Deployment, local: Deployment) -> None:
    assert admin(server, "GET", "/shares", token="").status_code == 401
    wrong = admin(server, "GET", "/shares", token="dsa_wrong")
    assert wrong.status_code == 401 and wrong.json()["errorCode"] == "UNAUTHENTICATED"
    # A recipient's bearer token is not an admin token.
    server.share_tables("recipients-only", {"t": TABLE})
    assert admin(server, "GET", "/shares", token=server.token("recipients-only")).status_code == 401
    # Without [admin] token_hash the API is off.
    off = httpx.get(f"{local.server.url}/admin/v1/shares", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert off.status_code == 403 and "disabled" in off.json()["message"]


def test_cli_manages_a_remote_server(
    server: Deployment, testdata: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "share", "create", "remote", "sales", f"orders:delta:{TESTDATA_BUCKET}:{TABLE}") == 0
    assert (
        cli(server, "share", "update", "remote", "--add", f"sales:more:delta:{TESTDATA_BUCKET}:{TABLE}") == 0
    )
    assert cli(server, "share", "update", "remote", "--remove", "sales/more") == 0
    capsys.readouterr()
    assert cli(server, "share", "info", "remote") == 0
    info = capsys.readouterr().out
    assert "orders  [delta] testdata/delta-0.8.0-partitioned" in info and "more" not in info

    profile = tmp_path / "remote.share"
    assert cli(server, "token", "create", "remote", "--expires", "1d", "--profile", str(profile)) == 0
    document = json.loads(profile.read_text())
    assert document["endpoint"] == server.endpoint and document["shareCredentialsVersion"] == 1
    same_rows(delta_sharing.load_as_pandas(f"{profile}#remote.sales.orders"), expected_rows(testdata))

    # Rotation: the new profile works at once and the old one through its grace period.
    token_id = server.store.list_tokens("remote")[0].id
    rotated = tmp_path / "rotated.share"
    assert cli(server, "token", "rotate", "remote", token_id, "--grace", "1h", "--profile", str(rotated)) == 0
    assert "keeps working until" in capsys.readouterr().out
    for path in (profile, rotated):
        assert len(delta_sharing.SharingClient(str(path)).list_all_tables()) == 1
    capsys.readouterr()
    assert cli(server, "token", "list", "remote") == 0
    states = sorted(line.split("\t")[1] for line in capsys.readouterr().out.splitlines())
    assert states == ["active", "rotating"]

    # OAuth: a version 2 profile; the client exchanges its secret for access tokens itself.
    oauth_profile = tmp_path / "oauth.share"
    assert cli(server, "token", "create", "remote", "--oauth", "--profile", str(oauth_profile)) == 0
    document = json.loads(oauth_profile.read_text())
    assert document["type"] == "oauth_client_credentials" and document["shareCredentialsVersion"] == 2
    assert document["tokenEndpoint"] == server.endpoint + "/oauth/token"
    same_rows(delta_sharing.load_as_pandas(f"{oauth_profile}#remote.sales.orders"), expected_rows(testdata))
    capsys.readouterr()
    assert cli(server, "oauth", "list", "remote") == 0
    client_id, state = capsys.readouterr().out.split("\t")[:2]
    assert client_id == document["clientId"] and state == "active"
    assert cli(server, "oauth", "revoke", "remote", client_id) == 0
    token = httpx.post(
        server.endpoint + "/oauth/token",
        auth=(document["clientId"], document["clientSecret"]),
        data={"grant_type": "client_credentials"},
    )
    assert token.status_code == 401 and token.json()["error"] == "invalid_client"

    assert cli(server, "share", "remove", "remote") == 0
    capsys.readouterr()
    assert cli(server, "share", "list") == 0
    assert "remote" not in capsys.readouterr().out


def test_bad_admin_input_is_a_clear_4xx_and_changes_nothing(
    server: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    created = admin(
        server,
        "POST",
        "/shares",
        json={"name": "bad-input", "tables": ["s", f"t:delta:{TESTDATA_BUCKET}:{TABLE}"]},
    )
    assert created.status_code == 201
    before = admin(server, "GET", "/shares/bad-input").json()
    cases = [
        ("POST", "/shares", {"name": "bad-input"}, 409, "already exists"),
        ("POST", "/shares", {"name": "x y"}, 400, "invalid share name"),
        ("POST", "/shares", {"tables": []}, 400, "'name' must be a str"),
        ("POST", "/shares", {"name": "n", "tables": "s"}, 400, "array of strings"),
        ("PATCH", "/shares/bad-input", {"add": ["s:t2:delta:Bad_Bucket:p"]}, 400, "invalid bucket"),
        ("PATCH", "/shares/bad-input", {"add": ["s:t2:delta:bucket:../../etc"]}, 400, "invalid table path"),
        (
            "PATCH",
            "/shares/bad-input",
            {"add": [f"s:t2:delta:{TESTDATA_BUCKET}:p"], "remove": ["s/nope"], "check": False},
            404,
            "not in share",
        ),
        ("PATCH", "/shares/bad-input", {}, 400, "nothing to do"),
        ("PATCH", "/shares/bad-input", {"add": ["s:t:delta:b:p"], "check": 0}, 400, "must be a bool"),
        ("PATCH", "/shares/nope", {"remove": ["s/t"]}, 404, "does not exist"),
        ("POST", "/shares/bad-input/tokens", {"expires": "soon"}, 400, "invalid duration"),
        ("POST", "/shares/bad-input/tokens", {"expires": "999999999w"}, 400, "too long"),
        # [admin] max_token_lifetime (365d by default) bounds every lifetime, "never" included.
        (
            "POST",
            "/shares/bad-input/tokens",
            {"expires": "99999w"},
            400,
            "longer than [admin] max_token_lifetime",
        ),
        ("POST", "/shares/bad-input/tokens", {"expires": "never"}, 400, "use --expires 365d or less"),
        ("POST", "/shares/bad-input/oauth-clients", {"expires": "366d"}, 400, "max_token_lifetime (365d)"),
        ("POST", "/shares/bad-input/tokens/nope/rotate", {}, 404, "no active token"),
        ("POST", "/shares/bad-input/tokens/x/rotate", {"grace": "never"}, 400, "invalid duration"),
        ("DELETE", "/shares/bad-input/tokens/nope", None, 404, "no active token"),
        ("DELETE", "/shares/bad-input/oauth-clients/nope", None, 404, "no active OAuth client"),
        ("GET", "/shares/nope", None, 404, "not found"),
    ]
    for method, path, body, status, message in cases:
        response = admin(server, method, path, json=body)
        assert response.status_code == status, (method, path, body, response.text)
        assert message in response.json()["message"], response.text
    for raw in (b"{", b"[1, 2]", b"[" * 100_000):
        response = admin(server, "POST", "/shares", content=raw, headers={"Content-Type": "application/json"})
        assert response.status_code == 400 and response.json()["errorCode"] == "MALFORMED_REQUEST"
    assert admin(server, "GET", "/shares/bad-input").json() == before
    assert admin(server, "GET", "/shares/bad-input/tokens").json() == {"items": []}
    # The CLI reports the server's message on one line and exits 2.
    assert cli(server, "share", "create", "bad-input") == 2
    assert capsys.readouterr().err == "error: share 'bad-input' already exists\n"
    assert main(["--server", server.server.url, "--admin-token", "dsa_wrong", "share", "list"]) == 2
    assert "invalid admin token" in capsys.readouterr().err
    assert main(["--server", "ftp://example", "--admin-token", "x", "share", "list"]) == 2


MISSING_DELTA = f"gone:delta:{TESTDATA_BUCKET}:no/such/path"
MISSING_ICEBERG = "ice:uniform:default:nowhere:gone"
NO_DELTA = f"no Delta table at {TESTDATA_BUCKET}/no/such/path: it has no _delta_log/"
NO_ICEBERG = "no Iceberg table nowhere.gone in warehouse 'default'"


def test_added_tables_are_checked_by_the_api_and_the_clis_server_option(
    server: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table that is not there is refused (400, the local CLI's message), whether the admin API is
    called directly or by `sharing-server --server`; `check: false` / `--no-check` shares it anyway."""
    good = f"orders:delta:{TESTDATA_BUCKET}:{TABLE}"
    # One missing table among good ones: the share is not created at all.
    refused = admin(server, "POST", "/shares", json={"name": "checked", "tables": ["s", good, MISSING_DELTA]})
    assert refused.status_code == 400, refused.text
    assert NO_DELTA in refused.json()["message"] and '"check": false' in refused.json()["message"]
    assert admin(server, "GET", "/shares/checked").status_code == 404
    created = admin(server, "POST", "/shares", json={"name": "checked", "tables": ["s", good]})
    assert created.status_code == 201
    for spec, message in ((f"s:{MISSING_DELTA}", NO_DELTA), (f"s:{MISSING_ICEBERG}", NO_ICEBERG)):
        refused = admin(server, "PATCH", "/shares/checked", json={"add": [spec]})
        assert refused.status_code == 400 and message in refused.json()["message"], refused.text
        assert cli(server, "share", "update", "checked", "--add", spec) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert cli(server, "share", "create", "checked-cli", "s", good, MISSING_DELTA) == 2
    assert NO_DELTA in capsys.readouterr().err
    assert admin(server, "GET", "/shares/checked-cli").status_code == 404
    assert [t["name"] for t in admin(server, "GET", "/shares/checked").json()["tables"]] == ["orders"]
    # Tables written later: the body's `check: false`, the CLI's --no-check (sent as the same field).
    later = admin(server, "PATCH", "/shares/checked", json={"add": [f"s:{MISSING_DELTA}"], "check": False})
    assert later.status_code == 200 and later.json()["added"] == 1
    assert cli(server, "share", "update", "checked", "--no-check", "--add", f"s:{MISSING_ICEBERG}") == 0
    assert cli(server, "share", "create", "later-cli", "s", MISSING_DELTA, "--no-check") == 0
    names = sorted(t["name"] for t in admin(server, "GET", "/shares/checked").json()["tables"])
    assert names == ["gone", "ice", "orders"]
    assert [t["name"] for t in admin(server, "GET", "/shares/later-cli").json()["tables"]] == ["gone"]


def test_token_secrets_are_shown_once(server: Deployment) -> None:
    admin(server, "POST", "/shares", json={"name": "once", "tables": []})
    issued = admin(server, "POST", "/shares/once/tokens", json={"expires": "2h", "description": "d"}).json()
    assert issued["token"].startswith("dss_") and issued["profile"]["bearerToken"] == issued["token"]
    listed = admin(server, "GET", "/shares/once/tokens").json()["items"]
    assert [t["id"] for t in listed] == [issued["id"]]
    assert issued["token"] not in json.dumps(listed)
    client = admin(server, "POST", "/shares/once/oauth-clients", json={}).json()
    assert client["clientSecret"].startswith("dsc_")
    assert client["clientSecret"] not in admin(server, "GET", "/shares/once/oauth-clients").text
    assert admin(server, "DELETE", f"/shares/once/tokens/{issued['id']}").status_code == 204
    assert admin(server, "GET", "/shares/once/tokens").json()["items"][0]["state"] == "revoked"


def test_api_and_cli_give_the_same_default_lifetimes(server: Deployment) -> None:
    from datetime import UTC, datetime, timedelta

    from sharing_server.admin.cli_grammar import build_parser
    from sharing_server.admin.commands import DEFAULT_EXPIRES, DEFAULT_GRACE

    admin(server, "POST", "/shares", json={"name": "defaults", "tables": []})
    # Expiries are given to the second: bounded by the times around the calls, those cut to seconds.
    before = datetime.now(UTC).replace(microsecond=0)
    token = admin(server, "POST", "/shares/defaults/tokens", json={}).json()
    client = admin(server, "POST", "/shares/defaults/oauth-clients", json={}).json()
    after = datetime.now(UTC)
    for issued in (token, client):
        expires = datetime.fromisoformat(issued["expiresAt"].replace("Z", "+00:00"))
        assert before + timedelta(days=30) <= expires <= after + timedelta(days=30)
    parser = build_parser()
    assert parser.parse_args(["token", "create", "s"]).expires == DEFAULT_EXPIRES == "30d"
    assert parser.parse_args(["token", "create", "s", "--oauth"]).expires == DEFAULT_EXPIRES
    assert parser.parse_args(["token", "rotate", "s", "t"]).grace == DEFAULT_GRACE == "1h"


def test_an_admin_endpoint_left_without_the_admin_tokens_backend_is_closed() -> None:
    """The backend is on each route (`admin_routes`); a handler made by `endpoint` refuses a request
    that did not pass it, so a route added without it fails closed rather than open."""
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from share_store.errors import Unauthenticated
    from sharing_server.admin.routes import endpoint, list_shares

    called: list[str] = []

    def handler(admin: object, request: object, body: object) -> None:
        called.append("ran")

    handler.__name__ = list_shares.__name__
    bare = Starlette(routes=[Route("/shares", endpoint(handler, None), methods=["GET"])])  # type: ignore[arg-type]
    with TestClient(bare) as client, pytest.raises(Unauthenticated):
        client.get("/shares", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert called == []
