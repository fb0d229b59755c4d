"""Share metadata (issue 51, the 2026-02 protocol) as recipients and the provider see it, against a
live server: `/shares` and `/shares/{share}` say `id`, `displayName`, `comment` and `properties`
(leaving out what is not set) for a share's own token and for a named recipient's; the real
`delta_sharing` client lists and reads as before; the console shows a hostile comment as text."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import delta_sharing
import httpx
import pytest

from share_store.persistence.share_metadata import MetadataChange
from tests.conftest import ADMIN_TOKEN, Deployment, copy_testdata

TABLE = "simple_table"
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"> & "quotes"\nsecond line'
META = MetadataChange(
    display_name="Sales – EU <b>", comment=HOSTILE, properties={"team": "sales", "region": "eu-west-1"}
)


@pytest.fixture(scope="module", autouse=True)
def shares(server: Deployment) -> None:
    """`described` (every field set), `bare` (none), both of one kept table."""
    copy_testdata(server, TABLE)
    server.share_tables("described", {"t": TABLE})
    server.share_tables("bare", {"t": TABLE})
    server.store.update_share("described", metadata=META)


def protocol(server: Deployment, token: str, path: str) -> httpx.Response:
    return httpx.get(f"{server.endpoint}{path}", headers={"Authorization": f"Bearer {token}"})


def expected(server: Deployment, name: str) -> dict[str, Any]:
    share = server.store.get_share(name)
    item: dict[str, Any] = {"name": name, "id": share.id}
    if name == "described":
        item.update(displayName=META.display_name, comment=HOSTILE, properties=dict(META.properties))
    return item


def test_a_share_token_sees_its_share_s_metadata(server: Deployment) -> None:
    token = server.token("described")
    listed = protocol(server, token, "/shares")
    assert listed.status_code == 200 and listed.text.count("\n") <= 1  # one line: json.loads(next(lines))
    assert listed.json() == {"items": [expected(server, "described")]}
    one = protocol(server, token, "/shares/described")
    assert one.status_code == 200 and one.json() == {"share": expected(server, "described")}
    # What is not set is left out, not null.
    bare = protocol(server, server.token("bare"), "/shares/bare").json()
    assert bare == {"share": expected(server, "bare")} and set(bare["share"]) == {"name", "id"}
    # The real client lists and reads as it did.
    profile = server.profile("described")
    client = delta_sharing.SharingClient(profile)
    assert [s.name for s in client.list_shares()] == ["described"]
    assert [t.name for t in client.list_all_tables()] == ["t"]
    assert len(delta_sharing.load_as_pandas(f"{profile}#described.default.t")) > 0


def test_a_named_recipient_sees_each_granted_share_s_own(server: Deployment) -> None:
    server.store.create_recipient("partner")
    for name in ("described", "bare"):
        server.store.grant_share("partner", name)
    _, token = server.store.create_recipient_token("partner", None)
    listed = protocol(server, token, "/shares").json()
    assert listed == {"items": [expected(server, "bare"), expected(server, "described")]}
    # Paged: the metadata rides along on every page.
    first = protocol(server, token, "/shares?maxResults=1").json()
    assert first["items"] == [expected(server, "bare")]
    second = protocol(server, token, f"/shares?maxResults=1&pageToken={first['nextPageToken']}").json()
    assert second["items"] == [expected(server, "described")]
    assert protocol(server, token, "/shares/DESCRIBED").json()["share"]["displayName"] == META.display_name
    # A change is seen at once, and a cleared field is gone again.
    server.store.update_share("described", metadata=MetadataChange(comment="", unset=("region",)))
    changed = protocol(server, token, "/shares/described").json()["share"]
    assert "comment" not in changed and changed["properties"] == {"team": "sales"}
    server.store.update_share("described", metadata=META)
    profile = {"shareCredentialsVersion": 1, "endpoint": server.endpoint, "bearerToken": token}
    path = server.tmp / "partner-metadata.share"
    path.write_text(json.dumps(profile))
    assert [s.name for s in delta_sharing.SharingClient(str(path)).list_shares()] == ["bare", "described"]


def test_the_console_shows_the_metadata_as_text(server: Deployment) -> None:
    client = httpx.Client(base_url=server.server.url)
    form = client.get("/console/sign-in")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    signed = client.post("/console/sign-in", data={"csrf": csrf.group(1), "token": ADMIN_TOKEN})
    assert signed.status_code == 303
    page = client.get("/console/shares/described")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text and "<img src=x" not in page.text
    assert "Sales – EU <b>" not in page.text
    assert (
        html.escape("<script>alert(1)</script>") in page.text and html.escape("Sales – EU <b>") in page.text
    )
    assert "region" in page.text and "eu-west-1" in page.text
    bare = client.get("/console/shares/bare")
    assert bare.status_code == 200 and "Display name" not in bare.text
