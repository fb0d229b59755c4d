"""Console sessions: a signed cookie holding no secret, a CSRF token, an idle timeout.

The session lives in the cookie itself, signed with the server key, so every
replica accepts it without shared state. It holds when it was last used, its
CSRF token, whether its holder signed in, and a tag of the admin token's hash
(a new admin token ends every session made with the old one). The admin
token itself is only ever sent once, in the sign-in form, and never stored.
Each response re-issues the cookie with a fresh time: a session ends after
`idle` seconds unused, and at the latest `MAX_AGE_SECONDS` after signing in.
Signing out records the session's id in the store (`Admin.end_console_session`),
so a copy of its cookie stops working too, on every replica.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

from share_store.signing.token_codec import TokenCodec

COOKIE = "console_session"
COOKIE_PATH = "/console"
CSRF_FIELD = "csrf"
# However busy, a session ends this long after signing in.
MAX_AGE_SECONDS = 12 * 3600
FLASH_CHARS = 500


@dataclass(frozen=True)
class Session:
    """What the cookie holds; `flash` is a message for the next page shown."""

    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    last_seen: float = field(default_factory=time.time)
    signed_in: bool = False
    admin_tag: str = ""
    flash: tuple[str, str] | None = None
    id: str = field(default_factory=lambda: secrets.token_hex(16))
    started: float = field(default_factory=time.time)

    @property
    def ends(self) -> float:
        """When the session ends whatever its use (epoch seconds)."""
        return self.started + MAX_AGE_SECONDS

    def touched(self, now: float | None = None) -> Session:
        return replace(self, last_seen=time.time() if now is None else now)

    def with_flash(self, kind: str, message: str) -> Session:
        # Cut short: it rides in the cookie, and browsers drop cookies past 4 KB.
        return replace(
            self, flash=(kind, message if len(message) <= FLASH_CHARS else message[:FLASH_CHARS] + "…")
        )


class SessionCodec:
    """Turns sessions into cookie values and back, refusing forged, stale and foreign ones."""

    def __init__(self, key: bytes, admin_hash: str | None, idle_seconds: float) -> None:
        self._codec = TokenCodec(key, "console-session")
        # A tag, not the hash: the cookie need not reveal even the hash.
        self.admin_tag = hmac.new(key, (admin_hash or "").encode(), "sha256").hexdigest()[:16]
        self.idle_seconds = idle_seconds

    def encode(self, session: Session) -> str:
        payload: dict[str, Any] = {
            "c": session.csrf,
            "t": round(session.last_seen, 1),
            "i": session.id,
            "s": round(session.started, 1),
        }
        if session.signed_in:
            payload["a"] = session.admin_tag
        if session.flash:
            payload["f"] = list(session.flash)
        return self._codec.encode(payload)

    def decode(self, value: str | None, now: float | None = None) -> tuple[Session | None, bool]:
        """The session a cookie holds (None if none or forged), and whether it ended idle."""
        if not value:
            return None, False
        try:
            payload = self._codec.decode(value)
            csrf, last_seen = str(payload["c"]), float(payload["t"])
            session_id, started = str(payload["i"]), float(payload["s"])
            flash = payload.get("f")
            flash_pair = (
                (str(flash[0]), str(flash[1])) if isinstance(flash, list) and len(flash) == 2 else None
            )
        except (ValueError, KeyError, TypeError):
            return None, False
        now = time.time() if now is None else now
        tag = payload.get("a")
        signed_in = isinstance(tag, str) and hmac.compare_digest(tag, self.admin_tag)
        if signed_in and (now - last_seen > self.idle_seconds or now - started > MAX_AGE_SECONDS):
            return None, True
        tag = self.admin_tag if signed_in else ""
        return Session(csrf, last_seen, signed_in, tag, flash_pair, session_id, started), False

    def signed_in(self) -> Session:
        """A new session for someone who just gave the admin token (a new CSRF token too)."""
        return Session(signed_in=True, admin_tag=self.admin_tag)


def csrf_matches(session: Session | None, given: str | None) -> bool:
    return session is not None and bool(given) and hmac.compare_digest(session.csrf, given or "")


def cookie_header(value: str, secure: bool) -> str:
    """The Set-Cookie value: HttpOnly, SameSite=Strict, Secure over HTTPS, for /console only.

    No Max-Age: the browser forgets it when it closes, and the server ends it sooner if idle.
    """
    parts = [f"{COOKIE}={value}", f"Path={COOKIE_PATH}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
