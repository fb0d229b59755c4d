"""Catalog users' secrets sealed under the server key (`share_store.signing.secret_box`)."""

from __future__ import annotations

import base64

import pytest

from share_store.signing.secret_box import SealedSecretError, open_sealed, seal

SERVER_KEY = bytes(range(32))
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ü"


def test_a_sealed_secret_opens_with_the_same_key_and_access_key() -> None:
    token = seal(SERVER_KEY, "AKUSER", SECRET)
    assert token.startswith("v1:") and SECRET not in token
    assert open_sealed(SERVER_KEY, "AKUSER", token) == SECRET
    assert open_sealed(SERVER_KEY, "AKUSER", seal(SERVER_KEY, "AKUSER", "")) == ""


def test_two_seals_of_one_secret_differ() -> None:
    first, second = seal(SERVER_KEY, "AKUSER", SECRET), seal(SERVER_KEY, "AKUSER", SECRET)
    assert first != second
    assert open_sealed(SERVER_KEY, "AKUSER", first) == open_sealed(SERVER_KEY, "AKUSER", second) == SECRET


def test_another_server_key_does_not_open_it() -> None:
    token = seal(SERVER_KEY, "AKUSER", SECRET)
    with pytest.raises(SealedSecretError, match="'AKUSER' does not open") as caught:
        open_sealed(b"another server key", "AKUSER", token)
    assert SECRET not in str(caught.value)


def test_a_secret_moved_to_another_access_key_does_not_open() -> None:
    token = seal(SERVER_KEY, "AKUSER", SECRET)
    with pytest.raises(SealedSecretError, match="sealed for another access key"):
        open_sealed(SERVER_KEY, "AKOTHER", token)


def test_a_tampered_token_does_not_open() -> None:
    token = seal(SERVER_KEY, "AKUSER", SECRET)
    raw = bytearray(base64.urlsafe_b64decode(token[3:] + "=" * (-len(token[3:]) % 4)))
    for index in (0, 12, len(raw) - 1):  # the nonce, the ciphertext, the tag
        altered = bytearray(raw)
        altered[index] ^= 1
        tampered = "v1:" + base64.urlsafe_b64encode(bytes(altered)).rstrip(b"=").decode()
        with pytest.raises(SealedSecretError, match="altered"):
            open_sealed(SERVER_KEY, "AKUSER", tampered)
    with pytest.raises(SealedSecretError, match="truncated"):
        open_sealed(SERVER_KEY, "AKUSER", token[:20])
    with pytest.raises(SealedSecretError, match="unknown format"):
        open_sealed(SERVER_KEY, "AKUSER", "v2" + token[2:])
    with pytest.raises(SealedSecretError, match="unknown format"):
        open_sealed(SERVER_KEY, "AKUSER", SECRET)
