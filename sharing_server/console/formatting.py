"""How the console's templates show sizes, counts and times (Jinja filters, pure)."""

from __future__ import annotations

from datetime import UTC, datetime

UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def size(value: int | float | None) -> str:
    """1536 -> '1.5 KB' (powers of 1024, as storage consoles show them)."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in UNITS:
        if abs(amount) < 1024 or unit == UNITS[-1]:
            return f"{int(amount)} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def number(value: int | float | None) -> str:
    return "—" if value is None else f"{value:,}"


def _moment(value: datetime | str | int | None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int):  # epoch milliseconds, as Delta logs them
        return datetime.fromtimestamp(value / 1000, UTC)
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def when(value: datetime | str | int | None) -> str:
    """A UTC time to the second, or '—'."""
    moment = _moment(value)
    return "—" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(value: datetime | str | int | None, now: datetime | None = None) -> str:
    """'3 min ago', 'in 2 d', or 'never'."""
    moment = _moment(value)
    if moment is None:
        return "never"
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    for limit, unit, div in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600), (float("inf"), "d", 86400)):
        if seconds < limit:
            amount = f"{int(seconds // div)} {unit}"
            return f"in {amount}" if future else f"{amount} ago"
    raise AssertionError("unreachable")
