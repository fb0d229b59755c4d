"""Which bucket a request draws on: one per token, however its Authorization header is spelled."""

from __future__ import annotations

import pytest

from share_store.authentication.tokens import hash_secret
from sharing_server.auth.bearer import parse_bearer
from sharing_server.http.rate_limits import RateLimiter, credential_key

SECRET = "dss_abcdefghijklmnopqrstuvwxyz0123456789"
# Every spelling authentication accepts for SECRET.
SPELLINGS = [f"Bearer {SECRET}", f"bearer {SECRET}", f"BEARER   {SECRET}", f"Bearer {SECRET}   "]


@pytest.mark.parametrize("header", SPELLINGS)
def test_every_spelling_of_a_token_authenticates_and_keys_as_that_token(header: str) -> None:
    assert parse_bearer(header) == SECRET
    # The digest the store finds the token by: one bucket per token id.
    assert credential_key(header) == hash_secret(SECRET)


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer    ", "Basic abc", f"Token {SECRET}"])
def test_what_is_not_a_bearer_token(header: str) -> None:
    assert parse_bearer(header) is None


def test_other_schemes_key_by_value_with_case_and_spaces_evened_out() -> None:
    assert credential_key("Basic YWJjOmRlZg==") == credential_key("basic   YWJjOmRlZg==")
    assert credential_key("Basic YWJjOmRlZg==") != credential_key("Basic eHl6OmRlZg==")
    assert credential_key(None) is None


def test_a_token_spelled_differently_draws_on_the_same_bucket() -> None:
    # A burst of one and a refill every 1,000 s: the second request is refused, whatever its spelling.
    limiter = RateLimiter(per_token_rps=0.001, global_rps=0)
    assert limiter.check(SPELLINGS[0]) is None
    for header in SPELLINGS[1:]:
        refused = limiter.check(header)
        assert refused is not None and refused[0] == "token"
    # Another token has a bucket of its own.
    assert limiter.check("Bearer dss_another") is None


def test_the_admin_token_has_a_limit_of_its_own_outside_the_servers() -> None:
    from share_store.authentication.tokens import hash_secret

    admin = "dsa_the-admin-token"
    limiter = RateLimiter(
        per_token_rps=0.001, global_rps=0.001, admin_rps=0.001, admin_hash=hash_secret(admin)
    )
    assert limiter.check(f"Bearer {admin}") is None  # its own bucket's one request
    refused = limiter.check(f"bearer   {admin}")
    assert refused is not None and refused[0] == "admin"
    # Recipients are unchanged: their own token bucket, then the server's.
    assert limiter.check("Bearer dss_recipient") is None
    refused = limiter.check("Bearer dss_other")
    assert refused is not None and refused[0] == "global"
    # A wrong admin token is just another token.
    assert limiter.check("Bearer dsa_not-the-admin-token") == ("global", pytest.approx(1000, rel=0.01))


def test_provisioning_300_shares_through_the_admin_api_is_not_rate_limited(tmp_path) -> None:
    import httpx

    from share_store.authentication.tokens import hash_secret
    from tests.conftest import deploy

    token = "dsa_provisioning-admin-token-0123456789"

    served = deploy(tmp_path, {"type": "local", "root": str(tmp_path / "b")},
                    env={"SHARING_ADMIN_TOKEN_HASH": hash_secret(token)})  # fmt: skip
    try:
        with httpx.Client(base_url=served.server.url, headers={"Authorization": f"Bearer {token}"}) as client:
            answers = [
                client.post("/admin/v1/shares", json={"name": f"p{i}"}).status_code for i in range(300)
            ]
        assert answers == [201] * 300  # the recipients' default, 100 requests/s, would have refused some
    finally:
        served.server.stop()
        served.store.close()
