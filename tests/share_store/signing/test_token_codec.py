"""`share_store.signing.token_codec`: page and refresh tokens, signed, with one spelling each."""

from __future__ import annotations

import pytest


def test_page_tokens_have_one_spelling() -> None:
    from share_store.signing.token_codec import TokenCodec

    codec = TokenCodec(b"k" * 32, "test")
    token = codec.encode({"o": 1})
    assert codec.decode(token) == {"o": 1}
    body, mac = token.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for replacement in alphabet:
        variant = f"{body}.{mac[:-1]}{replacement}"
        if variant != token:
            with pytest.raises(ValueError):
                codec.decode(variant)
