"""What stopped the CLI or the server's start, told in one line: no traceback, no credentials.

Start-up meets the disk and the database for the first time: a data directory
it cannot write, a full disk, a database it cannot open. Those are the
operator's to fix, and a traceback would only hide what to fix. (A full disk
under the store's database comes as `StoreDiskFull`, which says so itself.)
"""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError


def describe(error: OSError | SQLAlchemyError, store_url: str | None = None) -> str:
    """One line saying what failed and where; `store_url` names the store (password hidden)."""
    if isinstance(error, OSError):
        # "No space left on device: …", "Permission denied: …", "Read-only file system: …".
        if error.strerror and error.filename:
            return f"{error.strerror}: {error.filename}"
        return error.strerror or str(error)
    # The DBAPI's own message, without the statement and parameters SQLAlchemy adds.
    orig = getattr(error, "orig", None)
    lines = str(orig if orig is not None else error).strip().splitlines()
    store = f" {_safe_url(store_url)}" if store_url else ""
    return f"cannot use the share store{store}: {lines[0] if lines else type(error).__name__}"


def _safe_url(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unparsable URL)"
