"""A provider at scale: 10,000 shares, 100,000 tokens, a 1,000-table share, 1,000 named recipients.

The store is filled directly (SQLite, the embedded default), then a live server
answers list pages and token checks, 100 requests each, p50 and p99: recipients'
`/shares` and `/all-tables` pages, the console's share list (a page, and a search)
and the admin API's pages. The token check is compared with the same request on a
store of one token: a request must not grow with the number of tokens.
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import create_engine, insert

from bench.concurrency import p99_ms
from bench.results import record
from bench.servers import Server
from share_store.authentication.tokens import hash_secret, new_secret, new_token_id
from share_store.persistence import ShareStore
from share_store.persistence.sql_schema import (
    recipient_shares_table,
    recipients_table,
    shares_table,
    tables_table,
    tokens_table,
)
from sharing_server.config import load_config
from sharing_server.startup import prepare_disk

SHARES, TOKENS, BIG_TABLES, RECIPIENTS = 10_000, 100_000, 1_000, 1_000
GRANTED = 1_000  # shares granted to the one recipient whose token lists them
TARGET_MS = 100.0
ADMIN_TOKEN = "dsa_bench-scale-admin-token-0123456789"
REQUESTS = 100


def fill(url: str, scale: bool) -> dict[str, str]:
    """The store's rows, bulk-inserted; the secrets of the tokens the bench uses."""
    store = ShareStore(url)  # creates the schema
    store.close()
    engine = create_engine(url)
    now = datetime.now(UTC)
    shares = SHARES if scale else 2
    tokens = TOKENS if scale else 1
    share_ids = [str(uuid.uuid4()) for _ in range(shares)]
    with engine.begin() as conn:
        conn.execute(
            insert(shares_table),
            [{"id": sid, "name": f"share-{i:05d}", "name_key": f"share-{i:05d}", "created_at": now}
             for i, sid in enumerate(share_ids)],
        )  # fmt: skip
        tables = [
            {"id": str(uuid.uuid4()), "share_id": sid, "schema_name": "default", "schema_key": "default",
             "name": "t", "name_key": "t", "format": "delta", "bucket": "b", "path": f"lake/{i}",
             "history_shared": True, "created_at": now}
            for i, sid in enumerate(share_ids[1:], start=1)
        ]  # fmt: skip
        # share-00001 holds 100 tables: a page of 100 of the big share should cost about one of these.
        tables += [
            {"id": str(uuid.uuid4()), "share_id": share_ids[1], "schema_name": "default",
             "schema_key": "default", "name": f"u{i:03d}", "name_key": f"u{i:03d}", "format": "delta",
             "bucket": "b", "path": f"hundred/{i}", "history_shared": True, "created_at": now}
            for i in range(99)
        ]  # fmt: skip
        big_tables = BIG_TABLES if scale else 10
        tables += [
            {"id": str(uuid.uuid4()), "share_id": share_ids[0], "schema_name": f"s{i % 10}",
             "schema_key": f"s{i % 10}", "name": f"t{i:04d}", "name_key": f"t{i:04d}", "format": "delta",
             "bucket": "b", "path": f"big/{i}", "history_shared": True, "created_at": now}
            for i in range(big_tables)
        ]  # fmt: skip
        for start in range(0, len(tables), 5000):
            conn.execute(insert(tables_table), tables[start : start + 5000])
        secrets = {"share": new_secret(), "recipient": new_secret(), "hundred": new_secret()}
        rows = [
            {"id": new_token_id(), "share_id": share_ids[i % shares], "share_name": f"share-{i % shares:05d}",
             "secret_hash": hash_secret(new_secret()), "description": "", "created_at": now,
             "expires_at": now + timedelta(days=30)}
            for i in range(tokens - 1)
        ]  # fmt: skip
        rows += [
            {"id": new_token_id(), "share_id": share_ids[index], "share_name": f"share-{index:05d}",
             "secret_hash": hash_secret(secrets[key]), "description": "", "created_at": now,
             "expires_at": now + timedelta(days=30)}
            for index, key in ((0, "share"), (1, "hundred"))
        ]  # fmt: skip
        recipients = RECIPIENTS if scale else 1
        recipient_ids = [new_token_id() for _ in range(recipients)]
        conn.execute(
            insert(recipients_table),
            [{"id": rid, "name": f"partner-{i:04d}", "name_key": f"partner-{i:04d}", "created_at": now}
             for i, rid in enumerate(recipient_ids)],
        )  # fmt: skip
        granted = min(GRANTED, shares)
        grants = [
            {"recipient_id": recipient_ids[0], "share_id": sid, "granted_at": now}
            for sid in share_ids[:granted]
        ]
        grants += [
            {"recipient_id": rid, "share_id": share_ids[(i * 7) % shares], "granted_at": now}
            for i, rid in enumerate(recipient_ids[1:], start=1)
        ]
        conn.execute(insert(recipient_shares_table), grants)
        rows.append(
            {"id": new_token_id(), "share_id": "", "share_name": "", "recipient_id": recipient_ids[0],
             "secret_hash": hash_secret(secrets["recipient"]), "description": "", "created_at": now,
             "expires_at": now + timedelta(days=30)}
        )  # fmt: skip
        for start in range(0, len(rows), 10_000):
            conn.execute(insert(tokens_table), rows[start : start + 10_000])
    engine.dispose()
    return secrets


def timed(call: Callable[[], httpx.Response]) -> tuple[float, float]:
    latencies = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        answer = call()
        latencies.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.text[:300]
    return statistics.median(latencies) * 1000, p99_ms(latencies)


def prepared(name: str, scale: bool) -> tuple[Server, dict[str, str]]:
    """A server (not started) over a store filled at `scale`, or with one token; its secrets."""
    env = {"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN), "SHARING_CACHE_WARM_ON_START": "false"}
    server = Server(name, env=env)
    config = load_config(server.config)
    prepare_disk(config)
    return server, fill(config.resolved_store_url(), scale)


def console_client(server: Server) -> httpx.Client:
    client = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60)
    form = client.get("/console/sign-in").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None
    client.post("/console/sign-in", data={"csrf": csrf.group(1), "token": ADMIN_TOKEN})
    return client


BIG = "/shares/share-00000/all-tables"


def recipients_pages(server: Server, secrets: dict[str, str]) -> list[tuple[str, tuple[float, float]]]:
    rows = []
    with server.client(secrets["share"]) as client:
        rows.append(("token check + /shares (per-share token)", timed(lambda: client.get("/shares"))))
        page = {"maxResults": 100}
        rows.append(
            ("/all-tables, 1st page of 100 (1,000 tables)", timed(lambda: client.get(BIG, params=page)))
        )
        token = client.get(BIG, params=page).json()["nextPageToken"]
        for _ in range(3):
            token = client.get(BIG, params={**page, "pageToken": token}).json()["nextPageToken"]
        fifth = {**page, "pageToken": token}
        rows.append(("/all-tables, 5th page of 100", timed(lambda: client.get(BIG, params=fifth))))
    with server.client(secrets["hundred"]) as client:
        small = "/shares/share-00001/all-tables"
        rows.append(
            ("/all-tables, a 100-table share's one page", timed(lambda: client.get(small, params=page)))
        )
    with server.client(secrets["recipient"]) as client:
        granted = "/shares, recipient granted 1,000 shares, page of 100"
        rows.append((granted, timed(lambda: client.get("/shares", params={"maxResults": 100}))))
    return rows


def provider_pages(server: Server) -> list[tuple[str, tuple[float, float]]]:
    console = console_client(server)
    admin = httpx.Client(
        base_url=f"http://127.0.0.1:{server.port}/admin/v1",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    try:
        return [
            ("console share list, first page (50)", timed(lambda: console.get("/console/shares"))),
            ("console share list, search",
             timed(lambda: console.get("/console/shares", params={"q": "share-0999"}))),
            ("console share list, page after share-05000",
             timed(lambda: console.get("/console/shares", params={"after": "share-05000"}))),
            ("admin API /shares?limit=100", timed(lambda: admin.get("/shares", params={"limit": 100}))),
            ("admin API /recipients (1,000)", timed(lambda: admin.get("/recipients"))),
        ]  # fmt: skip
    finally:
        console.close()
        admin.close()


def bench_scale() -> None:
    print(f"\nScale: {SHARES:,} shares, {TOKENS:,} tokens, {BIG_TABLES:,} tables in one share, "
          f"{RECIPIENTS:,} recipients (SQLite)")  # fmt: skip
    small, small_secrets = prepared("scale-one-token", scale=False)
    with small, small.client(small_secrets["share"]) as client:
        baseline = timed(lambda: client.get("/shares"))
    server, secrets = prepared("scale", scale=True)
    with server:
        rows = recipients_pages(server, secrets) + provider_pages(server)
    for name, (p50, p99) in rows:
        verdict = "ok" if p99 <= TARGET_MS else "over"
        print(f"  {name}: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({verdict})")
        record(f"scale: {name}", f"p50 {p50:.1f} / p99 {p99:.1f} ms", f"p99 ≤ {TARGET_MS:.0f} ms", verdict)
    pages = dict(rows)
    big_page, small_page = (
        pages["/all-tables, 5th page of 100"][0],
        pages["/all-tables, a 100-table share's one page"][0],
    )
    page_ratio = big_page / small_page
    print(f"  /all-tables page of a 1,000-table share vs a 100-table share's: {page_ratio:.2f}x")
    record("scale: /all-tables page, 1,000-table share vs 100-table share (p50)", f"{page_ratio:.2f}x",
           "≤ 2x", "met" if page_ratio <= 2 else "missed")  # fmt: skip
    checked = rows[0][1][0]
    ratio = checked / baseline[0]
    print(
        f"  token check, {TOKENS:,} tokens vs one: p50 {checked:.1f} vs {baseline[0]:.1f} ms ({ratio:.2f}x)"
    )
    record(
        "scale: token check, 100,000 tokens vs 1 (p50)",
        f"{ratio:.2f}x",
        "≈ 1x",
        "ok" if ratio < 1.5 else "over",
    )
