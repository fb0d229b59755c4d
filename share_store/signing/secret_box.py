"""Catalog users' secret keys, encrypted at rest under the server key.

SigV4 verification needs each secret in plain to sign with it, so the store
cannot keep a hash: it keeps `seal`'s token, which only the server key opens.
The key is AES-256-GCM's, derived from the server key with HKDF-SHA256 (so the
server key is never used as is for a second purpose); each value has a random
96-bit nonce, and the access key is the associated data, so a sealed secret
copied onto another user's row does not open.

A token is `v1:` + base64url(nonce + ciphertext + tag), unpadded: text for a
database column, versioned so that another scheme can come beside this one.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = "v1"
HKDF_INFO = b"catalog-user-secrets"
NONCE_BYTES = 12
TAG_BYTES = 16


class SealedSecretError(Exception):
    """A sealed secret that does not open; the message names the access key, never a secret."""


def _aead(server_key: bytes) -> AESGCM:
    # Imported on first use: cryptography's bindings take 6.5 MB a server that has no catalog
    # users never needs (one with own warehouses loads them as it starts: `app.CATALOG_MODULES`).
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=HKDF_INFO).derive(server_key)
    return AESGCM(derived)


def seal(server_key: bytes, access_key: str, secret: str) -> str:
    """`secret` encrypted for `access_key` under the server key, as a text token."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = _aead(server_key).encrypt(nonce, secret.encode(), access_key.encode())
    return f"{VERSION}:{base64.urlsafe_b64encode(nonce + sealed).rstrip(b'=').decode()}"


def open_sealed(server_key: bytes, access_key: str, token: str) -> str:
    """The secret `seal` sealed for `access_key`; `SealedSecretError` if the token does not open.

    It does not when the server key is another, the token was sealed for another
    access key, or it was altered; GCM cannot tell these apart, and neither can we.
    """
    version, _, encoded = token.partition(":")
    if version != VERSION:
        raise SealedSecretError(f"the secret of access key {access_key!r} is sealed in an unknown format")
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) < NONCE_BYTES + TAG_BYTES:
        raise SealedSecretError(f"the sealed secret of access key {access_key!r} is truncated or not base64")
    aead = _aead(server_key)
    from cryptography.exceptions import InvalidTag

    try:
        plain = aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], access_key.encode())
    except InvalidTag:
        raise SealedSecretError(
            f"the sealed secret of access key {access_key!r} does not open: the server key changed, "
            "it was sealed for another access key, or it was altered"
        ) from None
    return plain.decode()
