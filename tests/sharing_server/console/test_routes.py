"""The console without a browser: sign-in, sessions, CSRF, and what a recipient's token cannot do."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from share_store.authentication.console_sessions import MAX_AGE_SECONDS, Session, SessionCodec
from share_store.authentication.tokens import hash_secret
from share_store.errors import Unauthenticated
from tests.conftest import (
    ADMIN_TOKEN,
    TESTDATA_BUCKET,
    Deployment,
    audit_lines,
    audit_records,
    copy_testdata,
    deploy,
)

TABLE = "delta-0.8.0-partitioned"
DV_TABLE = "table-with-dv-small"


@pytest.fixture(scope="module", autouse=True)
def tables(server: Deployment) -> None:
    """The kept tables this module's shares hold, in the server's testdata bucket."""
    for table in (TABLE, DV_TABLE):
        copy_testdata(server, table)


def csrf_of(page: httpx.Response) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match, page.text
    return match.group(1)


def signed_in(server: Deployment) -> httpx.Client:
    client = httpx.Client(base_url=server.server.url)
    form = client.get("/console/sign-in")
    answer = client.post(
        "/console/sign-in", data={"csrf": csrf_of(form), "token": ADMIN_TOKEN, "next": "/console/shares"}
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/console/shares"
    return client


def test_signed_out_pages_redirect_to_sign_in(server: Deployment) -> None:
    for path in ("/console/", "/console/shares", "/console/activity", "/console/health", "/console/shares/x"):
        answer = httpx.get(server.server.url + path)
        assert answer.status_code == 303, path
        assert answer.headers["location"].startswith("/console/sign-in?next=")
    # A change without a session is refused outright.
    assert httpx.post(server.server.url + "/console/shares", data={"name": "x"}).status_code == 403


def test_session_cookie_flags_and_page_headers(server: Deployment) -> None:
    client = httpx.Client(base_url=server.server.url)
    form = client.get("/console/sign-in")
    answer = client.post("/console/sign-in", data={"csrf": csrf_of(form), "token": ADMIN_TOKEN})
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
    assert "Secure" not in cookie  # plain HTTP here; over HTTPS, see the next test
    assert ADMIN_TOKEN not in cookie and hash_secret(ADMIN_TOKEN) not in cookie
    page = client.get("/console/shares")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert (
        "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    )
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    assert "<script>" not in page.text  # no inline script anywhere


def test_secure_flag_over_https(tmp_path: Path) -> None:
    # Behind a TLS-terminating proxy (one trusted hop) the request is HTTPS, and so is the cookie.
    env = {"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN), "SHARING_SERVER_PROXY_HOPS": "1"}
    behind = deploy(tmp_path, {"type": "local", "root": str(tmp_path / "buckets")}, env=env)
    try:
        proxied = {"X-Forwarded-For": "127.0.0.9", "X-Forwarded-Proto": "https"}
        cookie = httpx.get(behind.server.url + "/console/sign-in", headers=proxied).headers["set-cookie"]
        assert "Secure" in cookie.split("; ") and "HttpOnly" in cookie.split("; ")
        plain = httpx.get(behind.server.url + "/console/sign-in", headers={"X-Forwarded-For": "127.0.0.9"})
        assert "Secure" not in plain.headers["set-cookie"].split("; ")
    finally:
        behind.server.stop()
        behind.store.close()


def test_post_without_csrf_token_is_refused(server: Deployment) -> None:
    client = signed_in(server)
    csrf = csrf_of(client.get("/console/shares"))
    assert client.post("/console/shares", data={"name": "nocsrf"}).status_code == 403
    assert client.post("/console/shares", data={"name": "nocsrf", "csrf": "forged"}).status_code == 403
    foreign = client.post(
        "/console/shares", data={"name": "nocsrf", "csrf": csrf}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and "came from http://evil.example" in foreign.text
    assert "nocsrf" not in [share.name for share in server.store.list_shares()]
    # The same form with its token goes through.
    assert client.post("/console/shares", data={"name": "withcsrf", "csrf": csrf}).status_code == 303
    assert "withcsrf" in [share.name for share in server.store.list_shares()]


def test_recipient_token_cannot_open_the_console(server: Deployment) -> None:
    server.share_tables("recipient-share", {"t": TABLE})
    recipient = server.token("recipient-share")
    # As a bearer header: the console reads no Authorization header.
    answer = httpx.get(
        server.server.url + "/console/shares", headers={"Authorization": f"Bearer {recipient}"}
    )
    assert answer.status_code == 303 and answer.headers["location"].startswith("/console/sign-in")
    # In the sign-in form: it is not the admin token.
    client = httpx.Client(base_url=server.server.url)
    refused = client.post(
        "/console/sign-in", data={"csrf": csrf_of(client.get("/console/sign-in")), "token": recipient}
    )
    assert refused.status_code == 401 and "not the admin token" in refused.text
    assert client.get("/console/shares").status_code == 303


def test_sign_out_ends_the_session_and_every_copy_of_its_cookie(server: Deployment) -> None:
    client = signed_in(server)
    csrf = csrf_of(client.get("/console/shares"))
    copy = client.cookies["console_session"]
    assert client.post("/console/sign-out", data={"csrf": csrf}).status_code == 303
    assert client.get("/console/shares").status_code == 303
    # The cookie as it was before signing out opens nothing either (on any replica: the store says so).
    stolen = httpx.get(server.server.url + "/console/shares", cookies={"console_session": copy})
    assert stolen.status_code == 303 and stolen.headers["location"].startswith("/console/sign-in")


def test_bad_table_spec_shows_the_cli_message(server: Deployment) -> None:
    client = signed_in(server)
    csrf = csrf_of(client.get("/console/shares"))
    client.post("/console/shares", data={"name": "specs", "csrf": csrf})
    client.post("/console/shares/specs/tables", data={"spec": "s:t:delta:Bad_Bucket:p", "csrf": csrf})
    page = client.get("/console/shares/specs")
    assert "invalid bucket name &#39;Bad_Bucket&#39;: 3-63 of a-z, 0-9, &#39;.&#39;, &#39;-&#39;" in page.text


def test_removing_a_table_says_what_stops_working_then_removes_it(server: Deployment) -> None:
    server.share_tables("removal", {"keep": TABLE, "drop": TABLE})
    client = signed_in(server)
    csrf = csrf_of(client.get("/console/shares/removal"))
    confirm = client.get("/console/shares/removal/tables/default/drop/remove")
    assert confirm.status_code == 200 and "will no longer see default.drop" in confirm.text
    removed = client.post("/console/shares/removal/tables/default/drop/remove", data={"csrf": csrf})
    assert removed.status_code == 303 and removed.headers["location"] == "/console/shares/removal"
    page = client.get("/console/shares/removal")
    assert 'class="flash ok"' in page.text and "Removed default.drop from removal." in page.text
    assert [table.name for table in server.store.list_tables("removal")] == ["keep"]


def test_added_tables_are_checked_as_the_cli_checks_them(server: Deployment) -> None:
    """A table that is not there is refused with the CLI's message, in a new share's table box (which
    then creates nothing) and when added; "Share before it is written" shares it anyway."""
    client = signed_in(server)
    csrf = csrf_of(client.get("/console/shares"))
    no_delta = f"no Delta table at {TESTDATA_BUCKET}/no/such/path: it has no _delta_log/"
    box = f"s\ngood:delta:{TESTDATA_BUCKET}:{TABLE}\ngone:delta:{TESTDATA_BUCKET}:no/such/path"
    created = client.post("/console/shares", data={"name": "checked", "tables": box, "csrf": csrf})
    assert created.status_code == 303 and created.headers["location"] == "/console/shares"
    page = html.unescape(client.get("/console/shares").text)
    assert 'class="flash error"' in page and no_delta in page and "--no-check" in page
    assert "checked" not in [share.name for share in server.store.list_shares()]

    client.post("/console/shares", data={"name": "checked", "tables": box.rsplit("\n", 1)[0], "csrf": csrf})
    for spec, message in (
        (f"s:gone:delta:{TESTDATA_BUCKET}:no/such/path", no_delta),
        ("s:ice:uniform:default:nowhere:gone", "no Iceberg table nowhere.gone in warehouse 'default'"),
    ):
        client.post("/console/shares/checked/tables", data={"spec": spec, "csrf": csrf, "history": "on"})
        page = html.unescape(client.get("/console/shares/checked").text)
        assert 'class="flash error"' in page and message in page, spec
    assert [table.name for table in server.store.list_tables("checked")] == ["good"]
    # Ticked, the box shares tables written later, in a new share as in an added table.
    later = {"spec": f"s:gone:delta:{TESTDATA_BUCKET}:no/such/path", "unchecked": "on", "csrf": csrf}
    client.post("/console/shares/checked/tables", data=later)
    assert "Added s:gone" in client.get("/console/shares/checked").text
    client.post("/console/shares", data={"name": "later", "tables": box, "unchecked": "on", "csrf": csrf})
    assert sorted(table.name for table in server.store.list_tables("later")) == ["gone", "good"]
    assert sorted(table.name for table in server.store.list_tables("checked")) == ["gone", "good"]


def test_console_is_off_without_an_admin_token(local: Deployment) -> None:
    answer = httpx.get(local.server.url + "/console/shares")
    assert answer.status_code == 403 and "console is off" in answer.text


def test_idle_sessions_end_and_forged_ones_are_refused() -> None:
    codec = SessionCodec(b"key", hash_secret("admin"), idle_seconds=60)
    value = codec.encode(codec.signed_in().touched(now=1000.0))
    session, idled = codec.decode(value, now=1059.0)
    assert session is not None and session.signed_in and not idled
    assert codec.decode(value, now=1061.0) == (None, True)
    # Another admin token (or server key) ends every session made before.
    assert SessionCodec(b"key", hash_secret("other"), 60).decode(value, now=1001.0)[0].signed_in is False
    assert SessionCodec(b"other", hash_secret("admin"), 60).decode(value, now=1001.0) == (None, False)
    assert codec.decode(value[:-2] + "AA", now=1001.0) == (None, False)
    assert not codec.decode(codec.encode(Session()), now=1001.0)[0].signed_in
    # However busy, a session ends 12 hours after signing in.
    busy = codec.encode(replace(codec.signed_in(), started=1000.0, last_seen=1000.0 + MAX_AGE_SECONDS))
    assert codec.decode(busy, now=1000.0 + MAX_AGE_SECONDS + 1) == (None, True)


def test_rotate_revoke_and_oauth_clients_through_the_console(server: Deployment) -> None:
    client = signed_in(server)
    csrf = csrf_of(client.get("/console/shares"))
    client.post("/console/shares", data={"name": "creds", "csrf": csrf})
    issued = client.post(
        "/console/shares/creds/tokens", data={"csrf": csrf, "expires": "2d", "description": "r1"}
    )
    assert issued.status_code == 200 and "shown once" in issued.text
    token_id = re.search(r'id="token-id">([0-9a-f]+)<', issued.text).group(1)
    bad = client.post(f"/console/shares/creds/tokens/{token_id}/rotate", data={"csrf": csrf, "grace": "soon"})
    assert bad.status_code == 303  # back to the share, with the CLI's message
    assert "invalid duration &#39;soon&#39;" in client.get("/console/shares/creds").text
    rotated = client.post(
        f"/console/shares/creds/tokens/{token_id}/rotate", data={"csrf": csrf, "grace": "1h"}
    )
    assert rotated.status_code == 200 and f"replaces token <code>{token_id}</code>" in rotated.text
    new_secret = re.search(r'id="secret" readonly value="([^"]+)"', rotated.text).group(1)
    assert server.store.authenticate(new_secret).share == "creds"
    states = {token.id: token for token in server.store.list_tokens("creds")}
    assert states[token_id].replaced_by is not None
    assert "rotating" in client.get("/console/shares/creds").text
    oauth = client.post("/console/shares/creds/oauth-clients", data={"csrf": csrf, "expires": "1d"})
    assert oauth.status_code == 200 and "oauth_client_credentials" in oauth.text
    [oauth_client] = server.store.list_oauth_clients("creds")
    confirm = client.get(f"/console/shares/creds/oauth-clients/{oauth_client.id}/revoke")
    assert "can no longer get access tokens" in confirm.text
    client.post(f"/console/shares/creds/oauth-clients/{oauth_client.id}/revoke", data={"csrf": csrf})
    assert server.store.list_oauth_clients("creds")[0].revoked_at is not None
    # Removing the share says what stops working first, then revokes its tokens.
    assert "revoked: every recipient" in client.get("/console/shares/creds/remove").text
    assert (
        client.post("/console/shares/creds/remove", data={"csrf": csrf}).headers["location"]
        == "/console/shares"
    )
    with pytest.raises(Unauthenticated):
        server.store.authenticate(new_secret)


def test_table_page_of_a_table_whose_rows_the_preview_cannot_show(server: Deployment) -> None:
    server.share_tables("dv", {"t": DV_TABLE})
    client = signed_in(server)
    page = client.get("/console/shares/dv/tables/default/t")
    # The facts and history stand; the preview says why it is missing.
    assert page.status_code == 200 and 'id="version"' in page.text, page.text[-800:]
    assert "Not previewed: the table&#39;s files have deletion vectors." in page.text
    assert client.get("/console/shares/dv/tables/default/absent").status_code == 404


def test_shares_list_counts_live_tokens_in_the_admin_api_too(server: Deployment) -> None:
    server.share_tables("counted", {"t": TABLE})
    server.token("counted")
    expired = server.token("counted", expires=timedelta(seconds=-1))
    assert expired
    answer = httpx.get(
        server.server.url + "/admin/v1/shares", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    [counted] = [item for item in answer.json()["items"] if item["name"] == "counted"]
    assert (counted["tables"], counted["activeTokens"]) == (1, 1)


def test_health_reports_an_unreachable_catalog(tmp_path: Path) -> None:
    from testbed.seaweed import free_port

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    behind = deploy(
        tmp_path,
        {"type": "local", "root": str(tmp_path / "buckets")},
        catalogs={"gone": {"type": "rest", "uri": closed}},
        env={"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN)},
    )
    try:
        page = signed_in(behind).get("/console/health")
        assert page.status_code == 200
        catalogs = page.text[page.text.index('id="catalogs"') :]
        assert "gone" in catalogs and "reachable</span>" not in catalogs.split("</table>")[0]
        assert "sqlite" in page.text
        # Adding a table of that catalog is refused with why (a 400 on the admin API, not a 500).
        api = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        url = behind.server.url + "/admin/v1/shares"
        assert httpx.post(url, json={"name": "far"}, headers=api).status_code == 201
        refused = httpx.patch(url + "/far", json={"add": ["s:t:uniform:gone:ns:t"]}, headers=api)
        assert refused.status_code == 400, refused.text
        assert "cannot look for Iceberg table ns.t" in refused.json()["message"]
        # The health page now says when and why the catalog last failed, besides its live probe.
        again = signed_in(behind).get("/console/health").text
        catalogs = again[again.index('id="catalogs"') :].split("</table>")[0]
        assert "last error" in catalogs and "is unreachable" in catalogs
        # The admin API's health says the same: backend, not loaded, the last error and when.
        health = httpx.get(behind.server.url + "/admin/v1/health", headers=api)
        assert health.status_code == 200, health.text
        assert health.json()["store"] == "sqlite"
        [gone] = health.json()["catalogs"]
        assert (gone["name"], gone["backend"], gone["loaded"]) == ("gone", "rest", False)
        assert "is unreachable" in gone["lastError"] and gone["lastErrorAt"].endswith("Z")
        assert httpx.get(behind.server.url + "/admin/v1/health").status_code == 401
    finally:
        behind.server.stop()
        behind.store.close()


def test_picker_and_health_on_s3(tmp_path: Path, seaweed, testdata: Path) -> None:
    from testbed.seaweed import upload_tree

    client = seaweed.client()
    client.create_bucket(Bucket="console-pick")
    upload_tree(client, testdata / TABLE, "console-pick", f"lake/{TABLE}")
    client.put_object(Bucket="console-pick", Key="lake/readme.txt", Body=b"not a table")
    env = {"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN)}
    on_s3 = deploy(tmp_path, seaweed.storage_config(path_style="true"), env=env)
    try:
        console = signed_in(on_s3)
        csrf = csrf_of(console.get("/console/shares"))
        console.post("/console/shares", data={"name": "picked", "csrf": csrf})
        found = console.get("/console/shares/picked/pick", params={"bucket": "console-pick"}).text
        spec = f"default:{TABLE.replace('.', '_')}:delta:console-pick:lake/{TABLE}"
        assert f"<code>{spec}</code>" in found and "readme" not in found
        # The spec the picker offers is one the share takes.
        console.post("/console/shares/picked/tables", data={"spec": spec, "csrf": csrf})
        assert [table.path for table in on_s3.store.list_tables("picked")] == [f"lake/{TABLE}"]
        # Found again, it is flagged as shared: here, and in another share once that holds it too.
        console.post("/console/shares", data={"name": "other-pick", "csrf": csrf})
        again = console.get("/console/shares/other-pick/pick", params={"bucket": "console-pick"}).text
        assert "already in this share" not in again and "shared in picked" in again
        mine = console.get("/console/shares/picked/pick", params={"bucket": "console-pick"}).text
        assert "already in this share" in mine
        # Several specs at once, one per line: all or none.
        two = f"a:one:delta:console-pick:lake/{TABLE}\nb:two:delta:console-pick:lake/{TABLE}"
        console.post("/console/shares/other-pick/tables", data={"spec": two, "csrf": csrf})
        assert sorted(t.name for t in on_s3.store.list_tables("other-pick")) == ["one", "two"]
        bad = f"c:three:delta:console-pick:lake/{TABLE}\nd:four:delta:console-pick:nowhere"
        console.post("/console/shares/other-pick/tables", data={"spec": bad, "csrf": csrf})
        assert sorted(t.name for t in on_s3.store.list_tables("other-pick")) == ["one", "two"]
        health = console.get("/console/health").text
        storage = health[health.index('id="storage"') :].split("</table>")[0]
        assert "console-pick" in storage and "s3" in storage and "reachable</span>" in storage
    finally:
        on_s3.server.stop()
        on_s3.store.close()


def test_wrong_admin_tokens_are_throttled_on_the_api_and_the_sign_in_page(tmp_path: Path) -> None:
    env = {"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN), "SHARING_LIMITS_PER_TOKEN_RPS": "0"}
    served = deploy(tmp_path, {"type": "local", "root": str(tmp_path / "buckets")}, env=env)
    try:
        url = served.server.url
        wrong = {"Authorization": "Bearer dsa_not-the-admin-token"}
        answers = [httpx.get(url + "/admin/v1/shares", headers=wrong).status_code for _ in range(10)]
        assert answers == [401] * 10
        refused = httpx.get(url + "/admin/v1/shares", headers=wrong)
        assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
        assert "too many wrong admin tokens from this address" in refused.json()["message"]
        # The address waits out the window whatever it sends, the console's sign-in included.
        right = httpx.get(url + "/admin/v1/shares", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert right.status_code == 429
        client = httpx.Client(base_url=url)
        form = client.get("/console/sign-in")
        page = client.post("/console/sign-in", data={"csrf": csrf_of(form), "token": ADMIN_TOKEN})
        assert page.status_code == 429 and "retry after" in page.text and page.headers["retry-after"]
        assert len(audit_lines(served, lambda r: r.get("sign_in") == "failed", 10)) == 10
        assert audit_lines(served, lambda r: r.get("sign_in") == "throttled")
        records = audit_records(served)
        assert not any("dsa_not-the-admin-token" in json.dumps(r) for r in records)
    finally:
        served.server.stop()
        served.store.close()


def test_recipients_in_the_console_grant_shares_and_issue_tokens_and_links(
    server: Deployment, tmp_path: Path
) -> None:
    server.share_tables("console-north", {"orders": TABLE})
    server.share_tables("console-south", {"orders": TABLE})
    console = signed_in(server)
    csrf = csrf_of(console.get("/console/recipients"))
    created = console.post("/console/recipients", data={"name": "globex", "csrf": csrf})
    assert created.status_code == 303 and created.headers["location"] == "/console/recipients/globex"
    page = console.get("/console/recipients/globex")
    assert page.status_code == 200 and "console-north" in page.text  # offered to grant
    for share in ("console-north", "console-south"):
        console.post("/console/recipients/globex/shares", data={"share": share, "csrf": csrf_of(page)})
    listed = console.get("/console/recipients").text
    assert "console-north, console-south" in listed
    issued = console.post("/console/recipients/globex/tokens", data={"expires": "1d", "csrf": csrf_of(page)})
    secret = re.search(r'id="secret" readonly value="([^"]+)"', issued.text)
    assert issued.status_code == 200 and secret is not None
    headers = {"Authorization": f"Bearer {html.unescape(secret.group(1))}"}
    shares = httpx.get(f"{server.endpoint}/shares", headers=headers).json()["items"]
    assert [s["name"] for s in shares] == ["console-north", "console-south"]
    # Revoking a share in the console closes it for the token at once.
    console.post("/console/recipients/globex/shares/console-south/revoke", data={"csrf": csrf_of(page)})
    shares = httpx.get(f"{server.endpoint}/shares", headers=headers).json()["items"]
    assert [s["name"] for s in shares] == ["console-north"]
    linked = console.post(
        "/console/recipients/globex/tokens", data={"activation": "on", "csrf": csrf_of(page)}
    ).text
    link = html.unescape(re.search(r'id="link" readonly value="([^"]+)"', linked).group(1))  # type: ignore[union-attr]
    first = httpx.get(link)
    assert first.status_code == 200 and first.json()["bearerToken"].startswith("dss_")
    assert httpx.get(link).status_code == 410
    # Activity groups the recipient's requests under its name.
    import time

    deadline = time.monotonic() + 10
    while True:
        page = console.get("/console/activity").text
        if 'id="by-recipient"' in page or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    grouped = page[page.index('id="by-recipient"') :].split("</table>")[0]
    assert "<td>globex</td>" in grouped
    # A bad name is a message on the page, and nothing is made.
    bad = console.post("/console/recipients", data={"name": "../x", "csrf": csrf}, follow_redirects=True)
    assert "invalid recipient name" in html.unescape(bad.text)
    assert "../x" not in console.get("/console/recipients").text


def test_activity_names_revoked_tokens_and_says_unknown_ones(server: Deployment) -> None:
    import time

    server.share_tables("console-dead", {"orders": TABLE})
    token, secret = server.store.create_token("console-dead", None, "gone")
    server.store.revoke_token("console-dead", token.id)
    for bearer in (secret, "dss_no-such-token-anywhere"):
        answer = httpx.get(f"{server.endpoint}/shares", headers={"Authorization": f"Bearer {bearer}"})
        assert answer.status_code == 401
    revoked = audit_lines(server, lambda r: r.get("token_id") == token.id)
    assert revoked and revoked[0]["share"] == "console-dead" and revoked[0]["status"] == 401
    assert audit_lines(server, lambda r: r.get("token_id") == "unknown" and r["status"] == 401)
    console = signed_in(server)
    deadline = time.monotonic() + 10  # the activity reaches the store within about a second
    while True:
        page = console.get("/console/activity").text
        if (token.id in page and "unknown token" in page) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    tokens = page[page.index('id="by-token"') :].split("</table>")[0]
    assert token.id in tokens and "unknown token" in tokens
    assert secret not in page


def test_activity_lists_providers_changes_and_wrong_admin_tokens(server: Deployment) -> None:
    import time

    url = f"{server.server.url}/admin/v1/shares"
    assert (
        httpx.post(
            url, json={"name": "audited"}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ).status_code
        == 201
    )
    assert httpx.get(url, headers={"Authorization": "Bearer dsa_wrong-admin-token"}).status_code == 401
    console = signed_in(server)
    deadline = time.monotonic() + 10
    while True:
        page = console.get("/console/activity").text
        table = page[page.index('id="admin-events"') :].split("</table>")[0]
        if ("POST /admin/v1/shares" in table and "wrong admin token" in table) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "POST /admin/v1/shares" in table and "wrong admin token" in table
    assert "POST /console/sign-in" in table  # signing in is a change too
    assert "GET /admin/v1/shares</code></td><td>200" not in table  # reads are not listed
    assert "dsa_wrong-admin-token" not in page and ADMIN_TOKEN not in page


def test_activity_shows_what_a_change_set(server: Deployment) -> None:
    """A change whose path does not say what it set (a recipient's properties, a table's
    restriction) is listed with its text (issue 50)."""
    import time

    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    made = httpx.post(
        f"{server.server.url}/admin/v1/recipients",
        json={"name": "audited-props", "properties": {"nation": "JAPAN"}},
        headers=headers,
    )
    assert made.status_code == 201
    console = signed_in(server)
    deadline = time.monotonic() + 10
    while True:
        table = console.get("/console/activity").text.split('id="admin-events"')[1].split("</table>")[0]
        if "recipient audited-props: properties nation=JAPAN" in table or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "recipient audited-props: properties nation=JAPAN" in table


def test_a_token_is_edited_in_the_console_the_api_and_the_cli(server: Deployment, capsys) -> None:
    from sharing_server.cli import main

    server.share_tables("console-edit", {"orders": TABLE})
    token, secret = server.store.create_token("console-edit", timedelta(days=1), "before")
    console = signed_in(server)
    form = console.get(f"/console/shares/console-edit/tokens/{token.id}/edit")
    assert form.status_code == 200 and 'value="before"' in form.text
    saved = console.post(
        f"/console/shares/console-edit/tokens/{token.id}/edit",
        data={"description": "after", "expires": "10d", "csrf": csrf_of(form)},
    )
    assert saved.status_code == 303
    [edited] = server.store.list_tokens("console-edit")
    assert edited.description == "after" and edited.expires_at is not None
    assert timedelta(days=9) < edited.expires_at - datetime.now(UTC) <= timedelta(days=10)
    api = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    url = f"{server.server.url}/admin/v1/shares/console-edit/tokens/{token.id}"
    assert httpx.patch(url, json={"expires": "never"}, headers=api).status_code == 400  # the lifetime bound
    answer = httpx.patch(url, json={"description": "by api"}, headers=api)
    assert answer.status_code == 200 and answer.json()["description"] == "by api"
    assert httpx.patch(url, json={}, headers=api).json()["message"].startswith("nothing to change")
    cli = ["--server", server.server.url, "--admin-token", ADMIN_TOKEN]
    assert main([*cli, "token", "update", "console-edit", token.id, "--expires", "2h"]) == 0
    assert "expires" in capsys.readouterr().out
    [edited] = server.store.list_tokens("console-edit")
    assert edited.description == "by api" and edited.expires_at - datetime.now(UTC) <= timedelta(hours=2)
    # The same secret still works: editing changes the record, not the token.
    assert (
        httpx.get(f"{server.endpoint}/shares", headers={"Authorization": f"Bearer {secret}"}).status_code
        == 200
    )


def test_unknown_console_pages_are_html_and_there_is_a_favicon(server: Deployment) -> None:
    for client in (httpx.Client(base_url=server.server.url), signed_in(server)):
        page = client.get("/console/no/such/page")
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert "There is no console page at /console/no/such/page" in page.text
    icon = httpx.get(server.server.url + "/console/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
    assert 'rel="icon" href="/console/static/favicon.svg"' in signed_in(server).get("/console/shares").text


def test_the_share_list_is_searched_and_paged(server: Deployment) -> None:
    for index in range(60):
        server.store.create_share(f"paged-{index:03d}", [])
    server.store.create_token("paged-007", None, "")
    console = signed_in(server)
    first = console.get("/console/shares", params={"q": "PAGED-"}).text
    assert (
        first.count('href="/console/shares/paged-') == 50
        and "paged-049" in first
        and "paged-050" not in first
    )
    following = re.search(r'id="next-page" href="([^"]+)"', first)
    assert following is not None
    second = console.get(html.unescape(following.group(1))).text
    assert second.count('href="/console/shares/paged-') == 10 and "paged-059" in second
    assert 'id="next-page"' not in second
    row = first[first.index("paged-007</a>") :].split("</tr>")[0]
    assert "<td>1</td>" in row  # its live token, counted by the store
    api = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    url = f"{server.server.url}/admin/v1/shares"
    page = httpx.get(url, params={"search": "paged", "limit": 25}, headers=api).json()
    assert len(page["items"]) == 25 and page["next"] == "paged-024"
    rest = httpx.get(url, params={"search": "paged", "after": page["next"], "limit": 100}, headers=api).json()
    assert rest["items"][0]["name"] == "paged-025" and len(rest["items"]) == 35 and "next" not in rest
    assert httpx.get(url, params={"limit": "0"}, headers=api).status_code == 400
    everything = httpx.get(url, headers=api).json()["items"]
    assert sum(1 for s in everything if s["name"].startswith("paged-")) == 60
    assert httpx.get(url, params={"search": "50%_"}, headers=api).json()["items"] == []  # taken literally
