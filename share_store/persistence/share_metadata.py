"""A share's metadata (the 2026-02 protocol's `displayName`, `comment` and `properties`): its limits,
checked here only, and a change of it worked out before anything is kept.

Pure: no SQL, no HTTP. The CLI, the admin API and the console all reach the store
through `MetadataChange.applied_to`, so every path refuses the same input with the
same words. The protocol's bounds are 255 characters of display name, 65,536 of
comment and 50 properties; ours for a property's key and value, and for all of
them together, keep a share's row small, since every protocol request that
names a share reads it.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

from share_store.errors import AdminError
from share_store.model import Share

MAX_DISPLAY_NAME = 255
MAX_COMMENT = 65_536
MAX_PROPERTIES = 50
MAX_PROPERTY_KEY = 255
MAX_PROPERTY_VALUE = 65_536
#: Keys and values of all a share's properties, in characters: with the comment, a share's row
#: stays under 200,000 characters however it is filled.
MAX_PROPERTIES_TOTAL = 131_072

#: Text a reader cannot see but that changes what is shown: bidirectional embeddings, overrides
#: and isolates ("Trojan Source"), refused in a display name and a property's key.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: What a comment and a property's value may hold besides printable text: tabs and line breaks.
TEXT_WHITESPACE = frozenset("\t\n")


@dataclass(frozen=True)
class ShareMetadata:
    """A share's metadata as kept: None or {} for what is not set."""

    display_name: str | None = None
    comment: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MetadataChange:
    """What a create or an update asks of a share's metadata.

    `display_name` and `comment`: None leaves it as it is, "" clears it. `properties` are set
    (added or replaced), `unset` removed; a key in both, or unset but not there, is an error, so
    that a typo is not taken for done.
    """

    display_name: str | None = None
    comment: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.display_name is None and self.comment is None and not self.properties and not self.unset

    def applied_to(self, share: Share | None, share_name: str) -> ShareMetadata:
        """The metadata `share` (None: a share being made) has after this change, checked whole:
        `AdminError` naming the first limit passed, before anything is kept."""
        current = ShareMetadata() if share is None else ShareMetadata(
            share.display_name, share.comment, share.properties
        )  # fmt: skip
        properties = dict(current.properties)
        for key in self.unset:
            if key in self.properties:
                raise AdminError(f"property {_shown(key)} is both set and unset")
            if key not in properties:
                raise AdminError(f"share '{share_name}' has no property {_shown(key)} to unset")
            del properties[key]
        properties.update(_checked_pairs(self.properties))
        return ShareMetadata(
            _checked_display_name(self.display_name)
            if self.display_name is not None
            else current.display_name,
            _checked_comment(self.comment) if self.comment is not None else current.comment,
            _checked_properties(properties),
        )


#: No change: what a create or an update without metadata asks.
NO_CHANGE = MetadataChange()


def properties_text(properties: Mapping[str, str]) -> str | None:
    """Properties as the store keeps them: one JSON object, keys sorted; NULL for none."""
    return json.dumps(dict(sorted(properties.items())), ensure_ascii=False) if properties else None


def _shown(text: object, most: int = 64) -> str:
    """`text` quoted for an error line, cut to `most` characters (a key may be long, or hostile)."""
    if isinstance(text, str) and len(text) > most:
        return repr(text[:most] + "...")
    return repr(text)


def _unseen(char: str, allowed: frozenset[str] = frozenset()) -> bool:
    """A control character, a lone surrogate, a line or paragraph separator, or a bidi control."""
    if char in allowed:
        return False
    return unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") or char in BIDI_CONTROLS


def _checked_display_name(value: object) -> str | None:
    if not isinstance(value, str):
        raise AdminError("the display name must be a string")
    if len(value) > MAX_DISPLAY_NAME:
        raise AdminError(f"the display name is {len(value)} characters; at most {MAX_DISPLAY_NAME}")
    if any(_unseen(char) for char in value):
        raise AdminError("the display name holds a control character (one line of visible text)")
    return value or None


def _checked_comment(value: object) -> str | None:
    if not isinstance(value, str):
        raise AdminError("the comment must be a string")
    if len(value) > MAX_COMMENT:
        raise AdminError(f"the comment is {len(value)} characters; at most {MAX_COMMENT}")
    if any(_unseen(char, TEXT_WHITESPACE) for char in value if not char.isprintable()):
        raise AdminError("the comment holds a control character (only tabs and line breaks may be)")
    return value or None


def _checked_pairs(pairs: Mapping[str, str]) -> dict[str, str]:
    """Each key and value given, as its limits allow."""
    for key, value in pairs.items():
        if not isinstance(key, str):
            raise AdminError(f"property key {_shown(key)} must be a string")
        if not key:
            raise AdminError("property key '' is empty")
        if len(key) > MAX_PROPERTY_KEY:
            raise AdminError(
                f"property key {_shown(key)} is {len(key)} characters; at most {MAX_PROPERTY_KEY}"
            )
        if any(_unseen(char) for char in key):
            raise AdminError(f"property key {_shown(key)} holds a control character")
        if "=" in key:
            # The CLI says a property as KEY=VALUE: a key holding '=' could not be set or unset there.
            raise AdminError(f"property key {_shown(key)} holds '='")
        if not isinstance(value, str):
            raise AdminError(f"property {_shown(key)}: its value must be a string")
        if len(value) > MAX_PROPERTY_VALUE:
            raise AdminError(
                f"property {_shown(key)}: its value is {len(value)} characters; at most {MAX_PROPERTY_VALUE}"
            )
        if any(_unseen(char, TEXT_WHITESPACE) for char in value if not char.isprintable()):
            raise AdminError(f"property {_shown(key)}: its value holds a control character")
    return dict(pairs)


def _checked_properties(properties: dict[str, str]) -> dict[str, str]:
    """All a share's properties after a change: how many, how much together."""
    if len(properties) > MAX_PROPERTIES:
        raise AdminError(
            f"a share has at most {MAX_PROPERTIES} properties (this would make {len(properties)})"
        )
    total = sum(len(key) + len(value) for key, value in properties.items())
    if total > MAX_PROPERTIES_TOTAL:
        raise AdminError(f"the properties hold {total} characters together; at most {MAX_PROPERTIES_TOTAL}")
    return properties
