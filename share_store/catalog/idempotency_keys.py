"""Idempotency keys of the own warehouses' mutations in the store, so that replicas agree.

A request with a key first claims it: it inserts the key's row `in-progress`
(the primary key (caller, key) lets one of two concurrent requests insert), runs,
then finalizes the row with its answer (`finish`) or, for an answer that is not
kept (a 5xx), removes it (`release`), so that a retry runs again. A request that
finds the row decides by `share_store.catalog.idempotency.decide`; one that
takes a row over (expired, or abandoned by a dead process) does so by
compare-and-swap on the row's claim, so that two takers-over do not both run.

Answers are compressed and sealed with the server key (a create's may carry
vended keys or a signing grant), the caller and key as associated data: a sealed
answer copied to another caller's row does not open. Expired rows are removed by
maintenance's rounds (`sweep`), and by each process every `SWEEP_SECONDS` as it
claims (a server may run with background maintenance off); an expired row is
never replayed before either comes.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from share_store.catalog.idempotency import (
    CLAIM,
    DONE,
    IN_PROGRESS,
    LIFETIME,
    REPLAY,
    Answer,
    Binding,
    KeyRow,
    decide,
)
from share_store.persistence.mappers import utc, utc_now
from share_store.persistence.sql_schema import idempotency_keys_table
from share_store.persistence.transactions import Transactions
from share_store.signing.secret_box import open_sealed, seal

t = idempotency_keys_table
log = logging.getLogger(__name__)

#: How often a process removes expired keys itself, at most (besides maintenance's rounds).
SWEEP_SECONDS = 600.0


def sweep(conn: Connection, now: datetime) -> int:
    """Remove the keys whose lifetime has passed (maintenance's round does, on one replica)."""
    return int(conn.execute(delete(t).where(t.c.expires_at <= now)).rowcount or 0)


def _claimed(binding: Binding, now: datetime, lifetime: timedelta) -> dict[str, Any]:
    """A row's columns as a new claim of `binding` sets them."""
    return {
        "binding": binding.digest(),
        "claim": str(uuid.uuid4()),
        "status": IN_PROGRESS,
        "answer_status": None,
        "answer": None,
        "claimed_at": now,
        "expires_at": now + lifetime,
    }


class IdempotencyKeys:
    def __init__(
        self,
        transactions: Transactions,
        server_key: bytes,
        clock: Callable[[], datetime] = utc_now,
        lifetime: timedelta = LIFETIME,
    ) -> None:
        self.transactions = transactions
        #: How long a key answers its replays, from its answer (advertised in `/v1/config`).
        self.lifetime = lifetime
        self._server_key = server_key
        self.clock = clock
        self._lock = threading.Lock()
        self._next_sweep = time.monotonic() + SWEEP_SECONDS

    def claim(self, key: str, binding: Binding) -> tuple[str, str | Answer | None]:
        """What a request with `key` does: (`CLAIM`, its claim id) to run it, (`REPLAY`, the answer),
        (`REUSED`, None) or (`WAIT`, None)."""
        self._sweep_now_and_then()
        for attempt in range(4):  # a row removed or taken over between our read and our write: again
            now = self.clock()
            if attempt == 0:  # the common case, a new key: inserted without a read first
                inserted = self._insert(key, binding, now)
                if inserted is not None:
                    return CLAIM, inserted
            with self.transactions.read() as conn:
                row = self._row(conn, binding.caller, key)
            outcome = decide(row, binding, now)
            if outcome != CLAIM:  # the answer only to its own request's replay
                return outcome, row.answer if row is not None and outcome == REPLAY else None
            if row is None:
                inserted = self._insert(key, binding, now)
                if inserted is None:
                    continue  # another request inserted it first: decide on its row
                return CLAIM, inserted
            values = _claimed(binding, now, self.lifetime)
            claim = values["claim"]
            with self.transactions.change() as conn:
                taken = conn.execute(
                    update(t)
                    .where(t.c.caller == binding.caller, t.c.key == key, t.c.claim == row.claim)
                    .values(**values)
                ).rowcount
            if taken:
                return CLAIM, claim
        raise RuntimeError("an idempotency key kept changing under its claim")  # pragma: no cover

    def peek(self, key: str, binding: Binding) -> tuple[str, Answer | None]:
        """What `claim` would decide, claiming nothing: for a request waiting on the key's."""
        with self.transactions.read() as conn:
            row = self._row(conn, binding.caller, key)
        outcome = decide(row, binding, self.clock())
        return outcome, row.answer if row is not None and outcome == REPLAY else None

    def _insert(self, key: str, binding: Binding, now: datetime) -> str | None:
        """The key claimed by inserting its row (its claim id); None if it has one already."""
        values = _claimed(binding, now, self.lifetime)
        try:
            # Not waited to disk (the common case's cost): the commit it comes before is, and
            # takes the claim with it; a claim lost with the machine had no commit to guard.
            with self.transactions.change_flushed_later() as conn:
                conn.execute(insert(t).values(caller=binding.caller, key=key, **values))
        except IntegrityError:
            return None
        return str(values["claim"])

    def finish(self, caller: str, key: str, claim: str, answer: Answer) -> None:
        """The claimed request's answer kept for the key's lifetime from now (unless taken over)."""
        now = self.clock()
        # Not waited to disk either: the answer has gone meanwhile, and the next write that waits
        # (any commit) takes it along; lost with the machine, its key is abandoned, then rerun.
        with self.transactions.change_flushed_later() as conn:
            conn.execute(
                update(t)
                .where(t.c.caller == caller, t.c.key == key, t.c.claim == claim)
                .values(
                    status=DONE,
                    answer_status=answer.status,
                    answer=self._seal(caller, key, answer),
                    expires_at=now + self.lifetime,
                )
            )

    def release(self, caller: str, key: str, claim: str) -> None:
        """The claim given back without an answer kept (a 5xx, an error): a retry runs again."""
        with self.transactions.change() as conn:
            conn.execute(delete(t).where(t.c.caller == caller, t.c.key == key, t.c.claim == claim))

    def sweep(self) -> int:
        with self.transactions.change() as conn:
            return sweep(conn, self.clock())

    def _sweep_now_and_then(self) -> None:
        """Expired keys removed by this process too, every `SWEEP_SECONDS` at most: maintenance's
        rounds do it (`BackgroundMaintenance.run_round`), but a server may run with them off."""
        now = time.monotonic()
        with self._lock:
            if now < self._next_sweep:
                return
            self._next_sweep = now + SWEEP_SECONDS
        try:
            self.sweep()
        except SQLAlchemyError:  # the next one tries again; the claim has its own errors
            log.warning("expired idempotency keys were not removed", exc_info=True)

    def _row(self, conn: Connection, caller: str, key: str) -> KeyRow | None:
        found = conn.execute(select(t).where(t.c.caller == caller, t.c.key == key)).mappings().first()
        return None if found is None else self._key_row(caller, key, found)

    def _key_row(self, caller: str, key: str, row: RowMapping) -> KeyRow:
        answer = None
        if row["status"] == DONE and row["answer"] is not None:
            answer = self._open(caller, key, int(row["answer_status"]), row["answer"])
        return KeyRow(
            binding=row["binding"],
            claim=row["claim"],
            status=row["status"],
            claimed_at=utc(row["claimed_at"]),
            expires_at=utc(row["expires_at"]),
            answer=answer,
        )

    def _seal(self, caller: str, key: str, answer: Answer) -> str:
        # Compressed: a commit's answer is the table's whole metadata, JSON that shrinks ~10x.
        body = base64.b64encode(zlib.compress(answer.body, 1)).decode()
        text = json.dumps({"headers": answer.headers, "zlib": body})
        return seal(self._server_key, f"idempotency:{caller}:{key}", text)

    def _open(self, caller: str, key: str, status: int, sealed: str) -> Answer:
        kept = json.loads(open_sealed(self._server_key, f"idempotency:{caller}:{key}", sealed))
        return Answer(status, dict(kept["headers"]), zlib.decompress(base64.b64decode(kept["zlib"])))
