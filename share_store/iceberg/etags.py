"""Entity tags of both catalogs' table (and view) loads, and `If-None-Match` as RFC 9110 reads it.

Iceberg REST (1.8) lets a client send a load's `ETag` back as `If-None-Match`; a catalog answers
304 with no body while the answer would be the same. A tag is a strong quoted hash of everything
the answer is made of: the metadata file's location (a metadata file is never rewritten: a commit
writes a new one) or the metadata's bytes, the `snapshots` form asked for, the `config` handed out
with it, and, for recipients, whom the table is read for (a restricted table's visible metadata is
each recipient's own).

An answer that carries credentials that expire (vended keys, or a writer's signing grant, which
lasts an hour) gets no tag (`None`): a 304 would leave the client holding the keys of an earlier
answer, past their end. Such an answer is `Cache-Control: no-store` already; the client gets fresh
keys with every load, as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any


def entity_tag(parts: Iterable[str | bytes]) -> str:
    """A strong entity tag (quoted) over `parts`, each length-prefixed so that no two different
    sequences of parts hash alike."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return f'"{digest.hexdigest()[:40]}"'


def _config_text(config: Mapping[str, str]) -> str:
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"))


def table_load_tag(
    metadata_location: str | None,
    snapshots: str = "all",
    config: Mapping[str, str] | None = None,
    credentials: list[Any] | None = None,
    expiring: bool = False,
) -> str | None:
    """The tag of a writers' table load (or commit) answer: its metadata file, the `snapshots`
    form and the `config` handed out. None for an answer with credentials or an expiring grant,
    or with no metadata file yet (a staged create)."""
    if metadata_location is None or credentials or expiring:
        return None
    return entity_tag(["table", metadata_location, snapshots, _config_text(config or {})])


def shared_load_tag(
    body: bytes, recipient: str | None, properties: Mapping[str, str], vended: bool
) -> str | None:
    """The tag of a recipient's table load answer: the answer's bytes (its metadata cut to the
    grant and restriction, its signing `config`) and whom it was read for; None when it vends
    keys."""
    if vended:
        return None
    audience = json.dumps([recipient, dict(sorted(properties.items()))], separators=(",", ":"))
    return entity_tag(["shared-table", audience, body])


def view_load_tag(metadata_location: str) -> str:
    """The tag of a view's load: its metadata file (a view's answer carries no credentials)."""
    return entity_tag(["view", metadata_location])


def none_match(if_none_match: str | None, tag: str | None) -> bool:
    """Whether `If-None-Match` matches `tag`, so that a GET answers 304 (RFC 9110 13.1.2): `*`
    matches any answer; else a list of entity tags, compared weakly (`W/` ignored). An untagged
    answer (one carrying credentials) matches nothing, `*` included: it is always sent in full, so
    that a 304 never leaves a client with the expired credentials of an earlier answer."""
    if if_none_match is None or tag is None:
        return False
    value = if_none_match.strip()
    if value == "*":
        return True
    opaque = _opaque(tag)
    return any(_opaque(candidate) == opaque for candidate in _tags(value))


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def _tags(value: str) -> list[str]:
    """The entity tags of a list header; commas inside a quoted tag are kept (RFC 9110 8.8.3)."""
    tags: list[str] = []
    current: list[str] = []
    quoted = False
    for char in value:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            tags.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    tags.append("".join(current).strip())
    return [tag for tag in tags if tag]
