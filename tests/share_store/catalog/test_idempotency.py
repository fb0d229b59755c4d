"""The rules of `Idempotency-Key` (`share_store.catalog.idempotency`) and the keys in the store
(`IdempotencyKeys`), on SQLite and PostgreSQL (replicas share one store)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from share_store.catalog.idempotency import (
    CLAIM,
    CLAIM_LIFETIME,
    LIFETIME,
    REPLAY,
    REUSED,
    WAIT,
    Answer,
    Binding,
    InvalidIdempotencyKey,
    caller_id,
    parse_key,
    storable,
)
from share_store.catalog.idempotency_keys import IdempotencyKeys
from share_store.persistence import ShareStore, sqlite_url
from share_store.persistence.mappers import utc_now

SECRET = b"idempotency-tests-server-key-0123"
COMMIT = Binding("user:AK1", "POST", "warehouse_table", "/_iceberg/v1/wh/namespaces/ns/tables/t", "00" * 32)


def test_a_key_is_any_uuid_in_its_36_character_form() -> None:
    key = str(uuid.uuid4())
    assert parse_key(key.upper()) == key
    assert parse_key("0190b7e2-1c2d-7abc-8def-0123456789ab")  # a UUIDv7
    for bad in ["", "x" * 36, key.replace("-", ""), "{" + key + "}", key + " ", key[:35] + "g"]:
        with pytest.raises(InvalidIdempotencyKey):
            parse_key(bad)


def test_finalized_answers_are_2xx_and_deterministic_4xx_never_5xx_nor_the_callers_refusals() -> None:
    assert all(storable(status) for status in (200, 201, 204, 400, 404, 409, 422))
    assert not any(storable(status) for status in (202, 401, 403, 408, 413, 429, 500, 502, 503, 504))


def test_the_binding_tells_route_target_body_and_method_apart() -> None:
    others = [
        Binding(COMMIT.caller, "DELETE", COMMIT.route, COMMIT.target, COMMIT.body_sha256),
        Binding(COMMIT.caller, COMMIT.method, "warehouse_view", COMMIT.target, COMMIT.body_sha256),
        Binding(COMMIT.caller, COMMIT.method, COMMIT.route, COMMIT.target + "2", COMMIT.body_sha256),
        Binding(COMMIT.caller, COMMIT.method, COMMIT.route, COMMIT.target, "11" * 32),
    ]
    assert len({COMMIT.digest(), *(other.digest() for other in others)}) == 5
    assert caller_id(None) == "provider" and caller_id("AK1") == "user:AK1"


class Clock:
    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareStore]:
    url = (
        sqlite_url(tmp_path / "store.db")
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    opened = ShareStore(url)
    yield opened
    opened.close()


def test_a_claimed_key_is_waited_on_then_replayed_and_refused_for_another_request(store: ShareStore) -> None:
    clock = Clock()
    keys = IdempotencyKeys(store.transactions, SECRET, clock)
    key = str(uuid.uuid4())
    outcome, claim = keys.claim(key, COMMIT)
    assert outcome == CLAIM and isinstance(claim, str)
    assert keys.claim(key, COMMIT) == (WAIT, None)  # a concurrent duplicate does not run
    answer = Answer(200, {"content-type": "application/json"}, b'{"metadata-location": "s3://x"}')
    keys.finish(COMMIT.caller, key, claim, answer)
    assert keys.claim(key, COMMIT) == (REPLAY, answer)
    other = Binding(COMMIT.caller, "POST", COMMIT.route, COMMIT.target, "11" * 32)
    assert keys.claim(key, other) == (REUSED, None)
    # Another caller's key of the same text is its own.
    theirs = Binding("user:AK2", COMMIT.method, COMMIT.route, COMMIT.target, COMMIT.body_sha256)
    assert keys.claim(key, theirs)[0] == CLAIM


def test_a_released_key_runs_again_and_an_abandoned_claim_is_taken_over_once(store: ShareStore) -> None:
    clock = Clock()
    keys = IdempotencyKeys(store.transactions, SECRET, clock)
    key = str(uuid.uuid4())
    _, claim = keys.claim(key, COMMIT)
    assert isinstance(claim, str)
    keys.release(COMMIT.caller, key, claim)  # a 5xx: nothing kept
    _, claim = keys.claim(key, COMMIT)
    assert isinstance(claim, str)
    clock.now += CLAIM_LIFETIME  # its process died: the claim is taken over
    outcome, taken = keys.claim(key, COMMIT)
    assert outcome == CLAIM and taken != claim
    # The dead claim's late answer is not kept over the new claim's.
    keys.finish(COMMIT.caller, key, claim, Answer(200, {}, b"late"))
    assert keys.claim(key, COMMIT) == (WAIT, None)


def test_answers_are_sealed_and_expired_keys_are_swept(store: ShareStore) -> None:
    clock = Clock()
    keys = IdempotencyKeys(store.transactions, SECRET, clock)
    key = str(uuid.uuid4())
    _, claim = keys.claim(key, COMMIT)
    assert isinstance(claim, str)
    secret_body = b'{"config": {"s3.secret-access-key": "do-not-store-in-plain"}}'
    keys.finish(COMMIT.caller, key, claim, Answer(200, {}, secret_body))
    with store.transactions.read() as conn:
        stored = conn.exec_driver_sql("SELECT answer FROM idempotency_keys").scalar_one()
    assert b"do-not-store-in-plain" not in stored.encode()
    clock.now += LIFETIME - timedelta(seconds=1)
    assert keys.sweep() == 0 and keys.claim(key, COMMIT)[0] == REPLAY
    clock.now += timedelta(seconds=1)
    assert keys.claim(key, COMMIT)[0] == CLAIM  # expired: not replayed even before the sweep
    clock.now += LIFETIME
    assert keys.sweep() == 1
