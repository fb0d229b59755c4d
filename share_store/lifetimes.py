"""How long tokens and OAuth clients last: durations as the CLI and API write them, and their bound.

`30d`, `12h`, `90m`, `3600s`, `4w` or `never`; `[admin] max_token_lifetime` bounds
every lifetime given on any path (CLI, API, console), `never` included.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from share_store.errors import AdminError

DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
#: `[admin] max_token_lifetime`'s default: a year.
MAX_TOKEN_LIFETIME = timedelta(days=365)


def parse_duration(text: str, allow_never: bool = True) -> timedelta | None:
    if text == "never" and allow_never:
        return None
    match = DURATION.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        never = " or 'never'" if allow_never else ""
        raise AdminError(f"invalid duration {text!r}: use e.g. 3600s, 90m, 12h, 30d, 4w{never}")
    try:
        duration = timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
        # Expiries are now + duration, and datetime ends at year 9999: past it, this raises.
        datetime.now(UTC) + duration
    except OverflowError:
        raise AdminError(f"duration {text!r} is too long") from None
    return duration


def bounded_lifetime(expires: str, bound: timedelta | None) -> timedelta | None:
    """`expires` as a duration, refused beyond `bound` ("never" included), naming the setting."""
    lifetime = parse_duration(expires)
    if bound is not None and (lifetime is None or lifetime > bound):
        days = bound.days if bound.days and bound == timedelta(days=bound.days) else None
        most = f"{days}d" if days else f"{int(bound.total_seconds())}s"
        raise AdminError(
            f"a lifetime of {expires!r} is longer than [admin] max_token_lifetime ({most}): "
            f"use --expires {most} or less"
        )
    return lifetime
