"""The protocol's async queries (2026-07) in the store, so that any replica answers a poll.

One row per (caller, table, idempotency key): a submission given again finds
its query, on whichever replica it lands. What a query reads is in the row
(its parameters and the version it pinned); what it has produced is not (a
poll makes its lines again, from caches the query's first run warmed), so a
row stays small whatever the answer's size. Rows go once they expire.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError

from share_store.persistence.mappers import utc, utc_now
from share_store.persistence.sql_schema import async_queries_table
from share_store.persistence.transactions import Transactions

t = async_queries_table

PENDING, READY, FAILED = "pending", "ready", "failed"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def parameters_hash(parameters: dict[str, Any]) -> str:
    """What tells one query's parameters from another's, whatever order their keys came in."""
    return digest(_text(parameters))


def _text(parameters: dict[str, Any]) -> str:
    return json.dumps(parameters, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class AsyncQuery:
    id: str
    caller: str
    table_id: str
    parameters: dict[str, Any]
    parameters_hash: str
    #: The snapshot version the query reads, pinned when it was made; None: what its parameters say.
    version: int | None
    status: str
    #: The protocol's error (`errorCode`, `message`) of a failed query.
    error: dict[str, str] | None
    expires_at: datetime


def _query(row: RowMapping) -> AsyncQuery:
    return AsyncQuery(
        id=row["id"],
        caller=row["caller"],
        table_id=row["table_id"],
        parameters=json.loads(row["parameters"]),
        parameters_hash=row["parameters_hash"],
        version=row["version"],
        status=row["status"],
        error=json.loads(row["error"]) if row["error"] else None,
        expires_at=utc(row["expires_at"]),
    )


def _by_key(conn: Connection, caller: str, table_id: str, key_hash: str) -> AsyncQuery | None:
    row = (
        conn.execute(
            select(t).where(t.c.caller == caller, t.c.table_id == table_id, t.c.key_hash == key_hash)
        )
        .mappings()
        .first()
    )
    return _query(row) if row else None


class AsyncQueryStore:
    """Async queries' rows, through the store's transactions."""

    def __init__(self, transactions: Transactions) -> None:
        self.transactions = transactions

    def submit(
        self,
        caller: str,
        table_id: str,
        key: str,
        parameters: dict[str, Any],
        version: int | None,
        lifetime: timedelta,
    ) -> tuple[AsyncQuery, bool]:
        """The query of (`caller`, `table_id`, `key`), made now if there is none; and whether it was.

        Two replicas making the same query at once: the unique key lets one
        insert, and the other then finds its row.
        """
        key_hash, text = digest(key), _text(parameters)
        now = utc_now()
        with self.transactions.read() as conn:
            found = _by_key(conn, caller, table_id, key_hash)
        if found is not None and found.expires_at > now:
            return found, False
        row = {
            "id": str(uuid.uuid4()),
            "caller": caller,
            "table_id": table_id,
            "key_hash": key_hash,
            "parameters": text,
            "parameters_hash": digest(text),
            "version": version,
            "status": PENDING,
            "error": None,
            "created_at": now,
            "expires_at": now + lifetime,
        }
        try:
            with self.transactions.change() as conn:
                # Expired rows go as new ones come: no sweeper to run, and the index finds them.
                conn.execute(delete(t).where(t.c.expires_at <= now))
                conn.execute(insert(t).values(**row))
        except IntegrityError:
            with self.transactions.read() as conn:
                raced = _by_key(conn, caller, table_id, key_hash)
            if raced is None:
                raise
            return raced, False
        return _query(row), True  # type: ignore[arg-type]

    def get(self, query_id: str) -> AsyncQuery | None:
        with self.transactions.read() as conn:
            row = conn.execute(select(t).where(t.c.id == query_id)).mappings().first()
        query = _query(row) if row else None
        return query if query is not None and query.expires_at > utc_now() else None

    def pending(self, caller: str) -> int:
        """How many of `caller`'s queries are still pending (and not expired)."""
        with self.transactions.read() as conn:
            count = conn.execute(
                select(func.count())
                .select_from(t)
                .where(t.c.caller == caller, t.c.status == PENDING, t.c.expires_at > utc_now())
            ).scalar_one()
        return int(count)

    def settle(self, query_id: str, status: str, error: dict[str, str] | None = None) -> None:
        """Mark a query `ready` or `failed` (with the protocol's error); a failed one stays failed."""
        with self.transactions.change() as conn:
            conn.execute(
                update(t)
                .where(t.c.id == query_id, t.c.status != FAILED)
                .values(status=status, error=json.dumps(error) if error else None)
            )
