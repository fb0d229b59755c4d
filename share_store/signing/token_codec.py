"""Opaque, tamper-proof continuation tokens (list pages, query pages, refresh).

A token is base64url(JSON payload) + "." + base64url(HMAC): URL-safe, so the
Scala client may append it to a URL unencoded, and bound to what it continues
(the listing scope or the table and its query), so it cannot be replayed
elsewhere.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenCodec:
    def __init__(self, key: bytes, purpose: str) -> None:
        self._key = hashlib.sha256(key + b"\x00" + purpose.encode()).digest()

    def encode(self, payload: dict[str, Any]) -> str:
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        mac = hmac.new(self._key, body, hashlib.sha256).digest()[:16]
        return f"{_b64(body)}.{_b64(mac)}"

    def decode(self, token: str) -> dict[str, Any]:
        """The payload; `ValueError` if the token is malformed or was not ours."""
        try:
            body_part, mac_part = token.split(".")
            body, mac = _unb64(body_part), _unb64(mac_part)
        except (ValueError, binascii.Error) as error:
            raise ValueError("malformed token") from error
        # Only the canonical spelling is accepted: base64's spare bits would
        # otherwise let several strings stand for one token.
        if _b64(body) != body_part or _b64(mac) != mac_part:
            raise ValueError("malformed token")
        expected = hmac.new(self._key, body, hashlib.sha256).digest()[:16]
        if not hmac.compare_digest(mac, expected):
            raise ValueError("token signature mismatch")
        payload = json.loads(body)
        if not isinstance(payload, dict):
            raise ValueError("malformed token")
        return payload
