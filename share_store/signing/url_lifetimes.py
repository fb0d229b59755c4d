"""How long a response's pre-signed URLs stay valid: long enough for the read, never past its token.

A client that cannot refresh URLs (delta-sharing 1.4 for pandas reads every
file of an answer in turn and never asks again, delta-io/delta-sharing#941)
fails midway when the answer's first URLs expire before it reaches its last
file. So an answer's URLs live the storage's `url_lifetime` at least, plus an
allowance per file it hands out, up to the provider's ceiling; and never past
the expiry of the token they were signed for, so that an expired or short-lived
token's reads end when it does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

#: SigV4 pre-signed URLs live 7 days at most.
LONGEST_SIGNABLE = 7 * 24 * 3600


@dataclass(frozen=True)
class UrlLifetimes:
    #: Seconds every URL lives at least (`[server] url_lifetime`).
    base: int = 3600
    #: Milliseconds more per file the answer hands out (`[limits] url_lifetime_per_file_ms`).
    per_file_ms: float = 50.0
    #: The ceiling, whatever the answer's size (`[limits] url_lifetime_max`).
    longest: int = 6 * 3600

    def for_answer(self, files: int | None, token_expires_at: datetime | None, now: float) -> int:
        """Seconds the URLs of an answer of `files` files (None: not known up front) live."""
        wanted = self.base
        if files is not None:
            wanted = max(wanted, math.ceil(files * self.per_file_ms / 1000))
        wanted = min(wanted, max(self.longest, self.base))
        if token_expires_at is not None:
            wanted = min(wanted, math.floor(token_expires_at.timestamp() - now))
        return max(1, wanted)
