"""The console in a real headless Chromium (Debian's, driven by Playwright) against a live server.

A provider signs in, creates a share, adds a Delta table and an Iceberg table
(the latter through the picker), creates a token and downloads its profile; a
recipient reads with `delta_sharing` and that profile; the read shows in
Activity; the preview equals what the client read; revoking the token refuses
the next read. Tables that are not there are refused (in a new share's table box
and when added) unless to be written later, and a table is removed. An own
warehouse's table page shows its files and maintenance, and runs it. Screenshots
of the main pages go to test-artifacts/console/.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from share_store.restrictions.restriction import TableRestriction
from tests.conftest import ADMIN_TOKEN, TESTDATA_BUCKET, Deployment, copy_testdata

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
TABLE = "delta-0.8.0-partitioned"
# Flags for a root user in a container, with nothing fetched from the network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Elements reaching past the screen's right edge, outside scrolling boxes (tables scroll sideways).
WIDER_THAN_SCREEN = """
[...document.querySelectorAll("body *")]
  .filter((e) => !(e.parentElement && e.parentElement.closest(".scroll")))
  .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
  .map((e) => e.tagName + "." + e.className + "#" + e.id)
"""

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (make chromium)"
)


@pytest.fixture(scope="module", autouse=True)
def tables(server: Deployment) -> None:
    """A kept Delta table at `testdata:sales/...`, and the Iceberg table `crm.customers` of the
    provider's default catalog, for the console to share."""
    copy_testdata(server, TABLE, f"sales/{TABLE}")
    catalog = server.catalogs.catalog("default")
    catalog.create_namespace("crm")
    customers = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["ann", "bob", "cy"]})
    catalog.create_table("crm.customers", customers.schema).append(customers)


@pytest.fixture(scope="module")
def page(server: Deployment) -> Iterator[sync_api.Page]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        context = browser.new_context(accept_downloads=True, viewport={"width": 1200, "height": 900})
        yield context.new_page()
        context.close()
        browser.close()


def shot(page: sync_api.Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def rows(frame: pd.DataFrame) -> list[tuple[str, ...]]:
    columns = sorted(frame.columns)
    return sorted(tuple(str(value) for value in record) for record in frame[columns].itertuples(index=False))


def preview_frame(page: sync_api.Page) -> pd.DataFrame:
    heads = page.locator("#preview thead th").all_inner_texts()
    cells = [row.locator("td").all_inner_texts() for row in page.locator("#preview tbody tr").all()]
    return pd.DataFrame(cells, columns=heads)


def test_a_provider_shares_tables_and_a_recipient_reads_them(
    server: Deployment, page: sync_api.Page, testdata: Path, tmp_path: Path
) -> None:
    expect = sync_api.expect
    url = server.server.url

    # Signed out: the console sends us to sign in.
    page.goto(f"{url}/console/")
    expect(page).to_have_url(f"{url}/console/sign-in?next=/console/")
    shot(page, "sign-in")
    # By keyboard alone: the token field has the focus, Enter submits.
    expect(page.get_by_label("Admin token")).to_be_focused()
    page.keyboard.type(ADMIN_TOKEN)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Shares")).to_be_visible()

    # A share, then a Delta table by its spec.
    page.get_by_label("Name").fill("browser")
    page.get_by_role("button", name="Create share").click()
    expect(page.locator(".flash")).to_have_text("Share browser created.")
    page.get_by_label("Table spec").fill(f"sales:parts:delta:{TESTDATA_BUCKET}:sales/{TABLE}")
    page.get_by_role("button", name="Add table").click()
    expect(page.locator("#tables")).to_contain_text("sales.parts")

    # A bad spec is refused with the CLI's own message.
    page.get_by_label("Table spec").fill("sales:nope:parquet:b:p")
    page.get_by_role("button", name="Add table").click()
    expect(page.locator(".flash.error")).to_contain_text("invalid table spec")

    # The Iceberg table through the picker: it fills in the spec.
    page.get_by_role("link", name="Find tables…").click()
    page.get_by_label("Warehouse").select_option("default")
    page.get_by_role("button", name="List Iceberg tables").click()
    page.get_by_role("link", name="crm.customers").click()
    expect(page.get_by_label("Table spec")).to_have_value("crm:customers:uniform:default:crm:customers")
    page.get_by_role("button", name="Add table").click()
    expect(page.locator("#tables")).to_contain_text("crm.customers")

    # A token, shown once, and its profile downloaded.
    page.get_by_label("Description", exact=True).first.fill("browser test recipient")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_role("heading", name="New bearer token for browser")).to_be_visible()
    token_id = page.locator("#token-id").inner_text()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download browser.share").click()
    profile = tmp_path / "browser.share"
    download.value.save_as(profile)
    shot(page, "token-issued")

    # The recipient reads both tables with the downloaded profile.
    parts = delta_sharing.load_as_pandas(f"{profile}#browser.sales.parts")
    assert rows(parts) == rows(_delta_rows(testdata))
    customers = delta_sharing.load_as_pandas(f"{profile}#browser.crm.customers")
    assert sorted(customers["name"]) == ["ann", "bob", "cy"]

    # The table page: its facts, and a preview equal to what the client read.
    page.goto(f"{url}/console/shares/browser/tables/sales/parts")
    expect(page.locator("#facts")).to_contain_text("year, month, day")
    assert rows(preview_frame(page)) == rows(parts)
    shot(page, "table")
    page.goto(f"{url}/console/shares/browser/tables/crm/customers")
    assert rows(preview_frame(page)) == rows(customers)

    # The reads show in Activity (recorded in the store within a second or so).
    deadline = time.monotonic() + 15
    while True:
        page.goto(f"{url}/console/activity")
        if "parts" in page.locator("#by-table").inner_text() or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    expect(page.locator("#by-table")).to_contain_text("parts")
    expect(page.locator("#by-token")).to_contain_text(token_id)
    shot(page, "activity")
    page.goto(f"{url}/console/health")
    expect(page.locator("#store")).to_contain_text("reachable")
    shot(page, "health")

    # Revoking the token: the console asks first, then the next read is refused.
    page.goto(f"{url}/console/shares/browser")
    expect(page.locator(f'tr[data-token="{token_id}"]')).not_to_contain_text("never")  # last use is shown
    shot(page, "share")
    page.get_by_role("link", name=f"Revoke token {token_id}").click()
    expect(page.locator("#consequence")).to_contain_text("refused")
    page.get_by_role("button", name="Revoke token").click()
    expect(page.locator(f'tr[data-token="{token_id}"]')).to_contain_text("revoked")
    with pytest.raises(Exception, match="401"):
        delta_sharing.load_as_pandas(f"{profile}#browser.sales.parts")

    page.goto(f"{url}/console/shares")
    shot(page, "shares")
    # Narrow screens: the page still fits its width.
    page.set_viewport_size({"width": 380, "height": 800})
    page.goto(f"{url}/console/shares/browser")
    wide = page.evaluate(WIDER_THAN_SCREEN)
    assert page.evaluate("document.documentElement.scrollWidth") <= 380 + 1, wide
    shot(page, "share-narrow")


def sign_in(page: sync_api.Page, url: str) -> None:
    """Signed in on the shares page (the page may be signed in already, by the test before)."""
    page.goto(f"{url}/console/sign-in?next=/console/shares")
    if "/sign-in" in page.url:
        page.get_by_label("Admin token").fill(ADMIN_TOKEN)
        page.keyboard.press("Enter")
    sync_api.expect(page.get_by_role("heading", name="Shares")).to_be_visible()


def test_missing_tables_are_refused_and_a_table_is_removed(server: Deployment, page: sync_api.Page) -> None:
    expect = sync_api.expect
    sign_in(page, server.server.url)
    parts = f"parts:delta:{TESTDATA_BUCKET}:sales/{TABLE}"
    missing = f"no Delta table at {TESTDATA_BUCKET}/no/such/path: it has no _delta_log/"

    # A new share whose table box names a table that is not there: refused, and nothing is created.
    page.get_by_label("Name").fill("removals")
    page.get_by_label("Tables").fill(f"sales\n{parts}\ngone:delta:{TESTDATA_BUCKET}:no/such/path")
    page.get_by_role("button", name="Create share").click()
    expect(page.locator(".flash.error")).to_contain_text(missing)
    expect(page.get_by_role("link", name="removals")).to_have_count(0)
    page.get_by_label("Name").fill("removals")
    page.get_by_label("Tables").fill(f"sales\n{parts}")
    page.get_by_role("button", name="Create share").click()
    expect(page.locator(".flash")).to_have_text("Share removals created.")

    # Tables that are not there, Delta and Iceberg, are refused with the CLI's messages...
    for spec, message in (
        (f"sales:gone:delta:{TESTDATA_BUCKET}:no/such/path", missing),
        ("crm:gone:uniform:default:crm:gone", "no Iceberg table crm.gone in warehouse 'default'"),
    ):
        page.get_by_label("Table spec").fill(spec)
        page.get_by_role("button", name="Add table").click()
        expect(page.locator(".flash.error")).to_contain_text(message)
        expect(page.locator(".flash.error")).to_contain_text("--no-check")
    expect(page.locator("#tables")).not_to_contain_text("gone")
    shot(page, "table-refused")
    # ...unless they are to be written later.
    page.get_by_label("Table spec").fill(f"sales:later:delta:{TESTDATA_BUCKET}:no/such/path")
    page.get_by_label("Share before it is written").check()
    page.get_by_role("button", name="Add table").click()
    expect(page.locator("#tables")).to_contain_text("sales.later")

    # Removing a table: the console says what stops working, then removes it.
    page.get_by_role("link", name="Remove sales.later").click()
    expect(page.locator("#consequence")).to_contain_text("will no longer see sales.later")
    page.get_by_role("button", name="Remove table").click()
    expect(page.locator(".flash")).to_have_text("Removed sales.later from removals.")
    expect(page.locator("#tables")).not_to_contain_text("sales.later")
    expect(page.locator("#tables")).to_contain_text("sales.parts")
    assert [table.name for table in server.store.list_tables("removals")] == ["parts"]


def test_an_own_tables_page_shows_its_files_and_runs_its_maintenance(
    server: Deployment, page: sync_api.Page
) -> None:
    """From the Tables page to the page of a table of the server's own warehouse, written by three
    pyiceberg appends through its catalog: files and rows, each maintenance kind's last run, and
    "Run maintenance now", which compacts the three files into one."""
    expect = sync_api.expect
    url = server.server.url
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert (
        httpx.post(f"{url}/_iceberg/v1/warehouses", json={"name": "lake"}, headers=admin).status_code == 200
    )
    writer = load_catalog("browser-writer", **{
        "type": "rest", "uri": f"{url}/_iceberg", "warehouse": "lake", "token": ADMIN_TOKEN,
    })  # fmt: skip
    writer.create_namespace("web")
    clicks = pa.table({"id": pa.array([1, 2], pa.int64()), "page": ["/", "/a"]})
    table = writer.create_table("web.clicks", clicks.schema)
    for _ in range(3):
        table.append(clicks)

    page.set_viewport_size({"width": 1200, "height": 900})
    sign_in(page, url)
    page.get_by_role("link", name="Tables", exact=True).click()
    page.get_by_role("link", name="web.clicks", exact=True).click()
    expect(page.get_by_role("heading", name="web.clicks")).to_be_visible()
    expect(page.locator("#data-files")).to_have_text("3")
    expect(page.locator("#delete-files")).to_have_text("0")
    expect(page.locator("#rows")).to_have_text("6")
    compaction = page.locator('#maintenance tr[data-kind="icebergCompaction"]')
    expect(compaction.locator(".status")).to_have_text("Not yet run")
    page.get_by_role("button", name="Run maintenance now").click()
    expect(page.locator(".flash.ok")).to_have_text(
        "Maintenance ran on lake.web.clicks: compaction successful; snapshot expiry successful; "
        "unreferenced file removal successful."
    )
    expect(compaction.locator(".status")).to_have_text("Successful")
    expect(compaction.locator(".details")).to_contain_text("3 data file(s) rewritten")
    expect(page.locator("#data-files")).to_have_text("1")
    expect(page.locator("#rows")).to_have_text("6")
    shot(page, "own-table")
    # Narrow screens: the facts and the Maintenance table (which scrolls sideways) fit.
    page.set_viewport_size({"width": 380, "height": 800})
    page.reload()
    wide = page.evaluate(WIDER_THAN_SCREEN)
    assert page.evaluate("document.documentElement.scrollWidth") <= 380 + 1, wide
    shot(page, "own-table-narrow")


def test_recipients_activity_views_narrow_actions_and_the_sign_in_throttle(
    server: Deployment, page: sync_api.Page, tmp_path: Path
) -> None:
    """Last in the module: it ends with this address throttled for a minute."""
    import httpx

    expect = sync_api.expect
    url = server.server.url
    page.set_viewport_size({"width": 1200, "height": 900})
    sign_in(page, url)
    server.share_tables("partnered", {"parts": f"sales/{TABLE}"})

    # A named recipient, granted a share, with a one-time activation link.
    page.get_by_role("link", name="Recipients").click()
    page.get_by_label("Name").fill("partner")
    page.get_by_role("button", name="Create recipient").click()
    expect(page.locator(".flash")).to_contain_text("Recipient partner created")
    page.get_by_label("Grant a share").select_option("partnered")
    page.get_by_role("button", name="Grant").click()
    expect(page.locator("#granted")).to_contain_text("partnered")
    page.get_by_label("One-time activation link").check()
    page.get_by_role("button", name="Create token").click()
    link = page.get_by_label("Activation link").input_value()
    shot(page, "recipient-link")
    profile = tmp_path / "partner.share"
    profile.write_text(httpx.get(link).text)
    assert httpx.get(link).status_code == 410
    assert len(delta_sharing.load_as_pandas(f"{profile}#partnered.default.parts")) == 7
    # A restriction shows on the share's page, and the recipient's properties on its own (issue 50).
    server.store.update_recipient_properties("partner", {"region": "emea", "tier": "gold"}, [])
    restriction = TableRestriction("year = CURRENT_RECIPIENT('year')", ("value", "year"))
    server.store.set_restriction("partnered", "default", "parts", restriction)
    page.goto(f"{url}/console/shares/partnered")
    expect(page.locator("#tables")).to_contain_text("rows where year = CURRENT_RECIPIENT('year')")
    expect(page.locator("#tables")).to_contain_text("columns value, year")
    page.goto(f"{url}/console/recipients/partner")
    expect(page.locator("#properties")).to_contain_text("region")
    expect(page.locator("#properties")).to_contain_text("emea")
    page.goto(f"{url}/console/recipients")
    expect(page.locator("#recipients")).to_contain_text("partnered")
    shot(page, "recipients")

    # Activity: the week's and a month's views, on a time axis, and the provider's own changes.
    # Changes reach the store's activity within a second or so: reload until they show.
    deadline = time.monotonic() + 15
    while True:
        page.goto(f"{url}/console/activity?range=7d")
        if (
            "POST /console/recipients" in page.locator("#admin-events").inner_text()
            or time.monotonic() > deadline
        ):
            break
        time.sleep(0.5)
    expect(page.locator("#admin-events")).to_contain_text("POST /console/recipients")
    assert page.locator(".chart text.tick").count() >= 6
    start, end = "2026-01-01T00:00", "2026-02-01T00:00"
    page.goto(f"{url}/console/activity?from={start}&to={end}")
    assert page.locator(".chart text.tick").count() >= 6
    shot(page, "activity-month")

    # At 390 px, a token's row actions are on screen, not past its edge.
    token, _ = server.store.create_token("partnered", None, "narrow")
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{url}/console/shares/partnered")
    revoke = page.get_by_role("link", name=f"Revoke token {token.id}")
    revoke.scroll_into_view_if_needed()
    box = revoke.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    remove = page.get_by_role("link", name="Remove default.parts")
    remove.scroll_into_view_if_needed()
    box = remove.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    shot(page, "share-390")

    # Wrong admin tokens: after ten, the sign-in page answers 429 and says when to retry.
    fresh = page.context.browser.new_context()  # type: ignore[union-attr]
    other = fresh.new_page()
    for attempt in range(11):
        other.goto(f"{url}/console/sign-in")
        other.get_by_label("Admin token").fill(f"dsa_wrong-{attempt}")
        with other.expect_navigation():
            other.keyboard.press("Enter")
    expect(other.locator(".flash.error")).to_contain_text("too many wrong admin tokens")
    shot(other, "sign-in-throttled")
    fresh.close()


def _delta_rows(testdata: Path) -> pd.DataFrame:
    from deltalake import DeltaTable

    return DeltaTable(str(testdata / TABLE)).to_pandas()
