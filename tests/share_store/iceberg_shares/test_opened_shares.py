"""Which `GET /v1/config` answers the token alone decides, and that those read nothing from the store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from share_store.errors import Forbidden
from share_store.iceberg_shares.opened_shares import configured_prefix, token_answers_config
from share_store.model import Token


def token(share: str = "North", recipient: str | None = None) -> Token:
    return Token("t1", "" if recipient else "s1", "" if recipient else share, "", datetime.now(UTC), None,
                 recipient_id=recipient)  # fmt: skip


class NoStore:
    """A store that fails on any use: the token-alone answers must not touch it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was read ({name})")


@pytest.mark.parametrize("warehouse", [None, "North", "north", "NORTH"])
def test_a_shares_own_token_answers_alone_for_no_warehouse_or_its_own(warehouse: str | None) -> None:
    assert token_answers_config(token(), warehouse)
    assert configured_prefix(NoStore(), "secret", token(), warehouse) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "warehouse",
    [
        "south",
        "north#",
        "north?x=1",
        "north/..",
        "north%2F",
        " north",
        "north ",
        "nor",
        "northern",
        "",
        "n\x00",
    ],
)
def test_any_other_warehouse_goes_to_the_store(warehouse: str) -> None:
    assert not token_answers_config(token(), warehouse)
    with pytest.raises(AssertionError, match="the store was read"):
        configured_prefix(NoStore(), "secret", token(), warehouse)  # type: ignore[arg-type]


def test_a_recipients_token_answers_alone_only_by_refusing_no_warehouse() -> None:
    recipient = token(recipient="r1")
    assert token_answers_config(recipient, None)
    with pytest.raises(Forbidden):
        configured_prefix(NoStore(), "secret", recipient, None)  # type: ignore[arg-type]
    # Its share token field is "": no warehouse name, not even "", is its own.
    for warehouse in ("", "north", "r1"):
        assert not token_answers_config(recipient, warehouse)
