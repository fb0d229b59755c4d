"""Who is calling the own warehouses (`share_store.catalog.callers`), without HTTP: SigV4 signed by
botocore, catalog access tokens from `issue_token`, and the admin token with its throttle."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as AwsCredentials

from share_store.authentication.sign_in_throttle import PER_ADDRESS, AdminToken
from share_store.authentication.tokens import hash_secret
from share_store.catalog.callers import (
    ACCESS_TOKEN_SECONDS,
    CatalogCallers,
    Credentials,
)
from share_store.catalog.policies import FULL_ACCESS_POLICY, READ_ONLY_EXAMPLE_POLICY
from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.errors import RateLimited, SignatureRejected, Unauthenticated
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.token_codec import TokenCodec

KEY = b"server-key-for-the-callers-tests"
ADMIN = "dsa_callers-test-admin-token-0123456789abcdef"
ENDPOINT = "http://catalog.test:8080"
ADDRESS = "127.0.3.7"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShareStore]:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    yield store
    store.close()


@pytest.fixture
def users(store: ShareStore) -> CatalogUsers:
    return CatalogUsers(store.transactions, KEY)


@pytest.fixture
def callers(users: CatalogUsers) -> CatalogCallers:
    return CatalogCallers(users, TokenCodec(KEY, "catalog-access"), AdminToken(hash_secret(ADMIN)))


@pytest.fixture
def alice(users: CatalogUsers) -> IssuedUser:
    return users.create("alice", READ_ONLY_EXAMPLE_POLICY)


def offered(authorization: str, address: str = ADDRESS, **fields: Any) -> Credentials:
    """A request offering `authorization`, as the HTTP layer reads it off a GET of the config."""
    values: dict[str, Any] = {
        "authorization": authorization,
        "method": "GET",
        "raw_path": b"/_iceberg/v1/config",
        "query": b"warehouse=my-warehouse",
        "headers": {"Authorization": authorization} if authorization else {},
        "body": b"",
        "address": address,
        **fields,
    }
    return Credentials(**values)


def bearer(token: str, address: str = ADDRESS) -> Credentials:
    return offered(f"Bearer {token}", address)


def signed(user: IssuedUser, method: str, path_and_query: str, body: bytes = b"") -> Credentials:
    """The request botocore signs for `user` (signing name s3tables), as the server receives it."""
    request = AWSRequest(method=method, url=ENDPOINT + path_and_query, data=body, headers={})
    SigV4Auth(AwsCredentials(user.access_key, user.secret_key), "s3tables", "local").add_auth(request)
    prepared = request.prepare()
    parts = urlsplit(prepared.url)
    headers = {"Host": parts.netloc, **dict(prepared.headers.items())}
    return Credentials(
        authorization=headers["Authorization"],
        method=method,
        raw_path=parts.path.encode(),
        query=parts.query.encode(),
        headers=headers,
        body=body,
        address=ADDRESS,
    )


# -- no proof ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization", ["", "   ", "Bearer", "Bearer    ", "Basic YWxpY2U6c2VjcmV0", "Token x"]
)
def test_no_usable_authorization_is_not_authenticated(callers: CatalogCallers, authorization: str) -> None:
    with pytest.raises(Unauthenticated, match="Authentication required") as refused:
        callers.authenticate(offered(authorization))
    assert refused.value.status_code == 401
    assert refused.value.iceberg_type == "NotAuthorizedException"


# -- catalog access tokens --------------------------------------------------------------------------


def test_an_issued_token_authenticates_as_its_user(callers: CatalogCallers, alice: IssuedUser) -> None:
    notes: dict[str, Any] = {}
    token = callers.issue_token(alice.access_key, alice.secret_key, notes)
    assert token is not None
    assert set(notes) == {"catalog_user"}  # the audit line names who got a token, never the secret
    assert alice.secret_key not in json.dumps(notes)
    assert alice.secret_key not in token
    request = bearer(token)
    who = callers.authenticate(request)
    assert who.name == "alice"
    assert who.policy is not None
    assert who.policy.to_json() == alice.policy.to_json()
    assert who.allows("s3tables:GetTable", "arn:aws:s3tables:::bucket/my-warehouse/table/ns/t")
    assert not who.allows("s3tables:CreateTable", "arn:aws:s3tables:::bucket/my-warehouse/table/ns/t")
    assert request.notes["catalog_user"] == "alice"
    assert "sign_in" not in request.notes


def test_a_token_request_is_audited_under_the_users_name_like_its_other_requests(
    callers: CatalogCallers, alice: IssuedUser
) -> None:
    issued: dict[str, Any] = {}
    token = callers.issue_token(alice.access_key, alice.secret_key, issued)
    assert token is not None
    used = bearer(token)
    callers.authenticate(used)
    assert used.notes["catalog_user"] == "alice"
    assert issued["catalog_user"] == used.notes["catalog_user"]


def test_the_scheme_is_read_without_regard_to_case(callers: CatalogCallers, alice: IssuedUser) -> None:
    token = callers.issue_token(alice.access_key, alice.secret_key, {})
    assert token is not None
    assert callers.authenticate(offered(f"bearer  {token} ")).name == "alice"
    assert callers.authenticate(offered(f"BEARER {token}")).name == "alice"


def test_an_issued_token_lasts_an_hour(callers: CatalogCallers, alice: IssuedUser) -> None:
    before = int(time.time())
    token = callers.issue_token(alice.access_key, alice.secret_key, {})
    assert token is not None
    payload = callers.tokens.decode(token)
    assert payload["k"] == alice.access_key
    assert before + ACCESS_TOKEN_SECONDS <= payload["e"] <= int(time.time()) + ACCESS_TOKEN_SECONDS


def test_an_expired_token_is_not_authenticated(callers: CatalogCallers, alice: IssuedUser) -> None:
    expired = callers.tokens.encode({"k": alice.access_key, "e": int(time.time()) - 5})
    with pytest.raises(Unauthenticated, match="expired"):
        callers.authenticate(bearer(expired))
    without_expiry = callers.tokens.encode({"k": alice.access_key})
    with pytest.raises(Unauthenticated, match="expired"):
        callers.authenticate(bearer(without_expiry))


def test_a_removed_users_token_stops_working(
    callers: CatalogCallers, users: CatalogUsers, alice: IssuedUser
) -> None:
    token = callers.issue_token(alice.access_key, alice.secret_key, {})
    assert token is not None
    assert callers.authenticate(bearer(token)).name == "alice"
    users.remove("alice")
    with pytest.raises(Unauthenticated, match="no longer exists"):
        callers.authenticate(bearer(token))
    assert callers.issue_token(alice.access_key, alice.secret_key, {}) is None


def test_a_users_new_policy_applies_to_the_token_it_holds(
    callers: CatalogCallers, users: CatalogUsers, alice: IssuedUser
) -> None:
    """The token names the user, not the policy: a policy changed since is the one checked."""
    token = callers.issue_token(alice.access_key, alice.secret_key, {})
    assert token is not None
    resource = "arn:aws:s3tables:::bucket/other/table/ns/t"
    assert not callers.authenticate(bearer(token)).allows("s3tables:CreateTable", resource)
    users.remove("alice")
    again = users.create("alice", FULL_ACCESS_POLICY)
    fresh = callers.issue_token(again.access_key, again.secret_key, {})
    assert fresh is not None
    assert callers.authenticate(bearer(fresh)).allows("s3tables:CreateTable", resource)
    with pytest.raises(Unauthenticated):  # the old keys are gone with the old user
        callers.authenticate(bearer(token))


def test_a_token_signed_for_another_purpose_or_key_is_not_a_catalog_token(
    callers: CatalogCallers, alice: IssuedUser
) -> None:
    payload = {"k": alice.access_key, "e": int(time.time()) + 600}
    for codec in (TokenCodec(KEY, "list-page"), TokenCodec(b"another key", "catalog-access")):
        notes: dict[str, Any] = {}
        request = replace(bearer(codec.encode(payload)), notes=notes)
        with pytest.raises(Unauthenticated, match="not valid"):
            callers.authenticate(request)
        assert notes["sign_in"] == "failed"  # checked as an admin token, and counted as a wrong one


def test_issue_token_refuses_a_wrong_secret_or_an_unknown_key(
    callers: CatalogCallers, alice: IssuedUser
) -> None:
    for key, secret in [
        (alice.access_key, "wrong"),
        (alice.access_key, alice.secret_key + "x"),
        (alice.access_key, ""),
        ("AKUNKNOWN000000000000", alice.secret_key),
        ("", ""),
    ]:
        notes: dict[str, Any] = {}
        assert callers.issue_token(key, secret, notes) is None
        assert notes == {}


def test_tokens_of_two_users_tell_them_apart(
    callers: CatalogCallers, users: CatalogUsers, alice: IssuedUser
) -> None:
    bob = users.create("bob")
    alice_token = callers.issue_token(alice.access_key, alice.secret_key, {})
    bob_token = callers.issue_token(bob.access_key, bob.secret_key, {})
    assert alice_token is not None and bob_token is not None
    assert callers.authenticate(bearer(alice_token)).name == "alice"
    assert callers.authenticate(bearer(bob_token)).name == "bob"
    # Bob's secret does not buy a token for Alice's key.
    assert callers.issue_token(alice.access_key, bob.secret_key, {}) is None


# -- the admin token --------------------------------------------------------------------------------


def test_the_admin_token_is_the_provider_allowed_everything(callers: CatalogCallers) -> None:
    request = bearer(ADMIN)
    who = callers.authenticate(request)
    assert who.policy is None
    assert who.name == "admin"
    assert who.allows("s3tables:DeleteTableBucket", "arn:aws:s3tables:::bucket/anything")
    assert request.notes == {"catalog_user": "admin"}


def test_wrong_bearer_tokens_are_throttled_per_address(callers: CatalogCallers) -> None:
    for attempt in range(PER_ADDRESS):
        request = bearer(f"dsa_wrong-{attempt}")
        with pytest.raises(Unauthenticated, match="not valid"):
            callers.authenticate(request)
        assert request.notes["sign_in"] == "failed"
    throttled = bearer("dsa_wrong-again")
    with pytest.raises(RateLimited) as refused:
        callers.authenticate(throttled)
    assert refused.value.status_code == 429 and refused.value.retry_after > 0
    assert throttled.notes["sign_in"] == "throttled"
    # While throttled, even the right token is refused from that address ...
    with pytest.raises(RateLimited):
        callers.authenticate(bearer(ADMIN))
    # ... but another address is not held to this one's failures.
    assert callers.authenticate(bearer(ADMIN, address="127.0.4.1")).policy is None
    with pytest.raises(Unauthenticated):
        callers.authenticate(bearer("dsa_wrong", address="127.0.4.2"))


def test_catalog_tokens_never_count_as_failed_admin_attempts(
    callers: CatalogCallers, alice: IssuedUser
) -> None:
    token = callers.issue_token(alice.access_key, alice.secret_key, {})
    assert token is not None
    for _ in range(PER_ADDRESS * 3):
        request = bearer(token)
        assert callers.authenticate(request).name == "alice"
        assert "sign_in" not in request.notes
    # Expired catalog tokens and removed users' are refused, but not as wrong admin tokens either.
    expired = callers.tokens.encode({"k": alice.access_key, "e": 1})
    for _ in range(PER_ADDRESS * 2):
        with pytest.raises(Unauthenticated, match="expired"):
            callers.authenticate(bearer(expired))
    assert callers.authenticate(bearer(ADMIN)).policy is None


def test_without_an_admin_token_configured_no_bearer_is_the_provider(users: CatalogUsers) -> None:
    callers = CatalogCallers(users, TokenCodec(KEY, "catalog-access"), AdminToken(None))
    request = bearer(ADMIN)
    with pytest.raises(Unauthenticated, match="not valid"):
        callers.authenticate(request)
    assert "catalog_user" not in request.notes


# -- SigV4 ------------------------------------------------------------------------------------------


def test_a_sigv4_signed_request_authenticates_as_its_user(callers: CatalogCallers, alice: IssuedUser) -> None:
    request = signed(alice, "GET", "/_iceberg/v1/config?warehouse=my-warehouse")
    assert request.authorization.startswith("AWS4-HMAC-SHA256 Credential=" + alice.access_key)
    who = callers.authenticate(request)
    assert who.name == "alice"
    assert who.policy is not None and who.policy.to_json() == alice.policy.to_json()
    assert request.notes == {"catalog_user": "alice"}


def test_a_signed_request_with_a_body_authenticates(callers: CatalogCallers, alice: IssuedUser) -> None:
    body = json.dumps({"namespace": ["ns"], "properties": {}}).encode()
    request = signed(alice, "POST", "/_iceberg/v1/my-warehouse/namespaces", body)
    assert callers.authenticate(request).name == "alice"


def test_a_signed_request_whose_body_changed_is_rejected(callers: CatalogCallers, alice: IssuedUser) -> None:
    body = json.dumps({"namespace": ["ns"], "properties": {}}).encode()
    request = signed(alice, "POST", "/_iceberg/v1/my-warehouse/namespaces", body)
    tampered = replace(request, body=json.dumps({"namespace": ["other"], "properties": {}}).encode())
    with pytest.raises(SignatureRejected, match="does not match") as refused:
        callers.authenticate(tampered)
    assert refused.value.status_code == 403
    assert "catalog_user" not in tampered.notes


def test_a_signed_request_whose_path_or_method_changed_is_rejected(
    callers: CatalogCallers, alice: IssuedUser
) -> None:
    request = signed(alice, "GET", "/_iceberg/v1/my-warehouse/namespaces/ns/tables/t")
    for changed in (
        replace(request, raw_path=b"/_iceberg/v1/my-warehouse/namespaces/ns/tables/u"),
        replace(request, method="DELETE"),
        replace(request, query=b"snapshots=refs"),
    ):
        with pytest.raises(SignatureRejected, match="does not match"):
            callers.authenticate(changed)


def test_a_request_signed_with_a_wrong_secret_or_unknown_key_is_rejected(
    callers: CatalogCallers, alice: IssuedUser
) -> None:
    wrong_secret = replace(alice, secret_key="not-alices-secret")
    with pytest.raises(SignatureRejected, match="does not match"):
        callers.authenticate(signed(wrong_secret, "GET", "/_iceberg/v1/config"))
    unknown = replace(alice, access_key="AKNOBODY00000000000")
    with pytest.raises(SignatureRejected, match="unknown access key"):
        callers.authenticate(signed(unknown, "GET", "/_iceberg/v1/config"))


def test_a_removed_users_signature_is_rejected(
    callers: CatalogCallers, users: CatalogUsers, alice: IssuedUser
) -> None:
    request = signed(alice, "GET", "/_iceberg/v1/config")
    assert callers.authenticate(request).name == "alice"
    users.remove("alice")
    with pytest.raises(SignatureRejected, match="unknown access key"):
        callers.authenticate(replace(request, notes={}))


def test_sigv4_failures_never_count_as_wrong_admin_tokens(callers: CatalogCallers, alice: IssuedUser) -> None:
    request = signed(alice, "GET", "/_iceberg/v1/config")
    for _ in range(PER_ADDRESS * 2):
        with pytest.raises(SignatureRejected):
            callers.authenticate(replace(request, method="PUT", notes={}))
    assert callers.authenticate(bearer(ADMIN)).policy is None
