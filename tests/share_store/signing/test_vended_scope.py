"""Session policies for vended keys: reads of the scope only, listing under its prefixes, size-bounded."""

from __future__ import annotations

import json

import pytest

from share_store.signing.vended_scope import (
    MAX_POLICY_CHARS,
    VendingScope,
    narrowest,
    policy_text,
    prefixes_of,
    session_policy,
)
from share_store.storage.sts_vending import VendingSettings


def test_the_policy_allows_reads_of_the_scope_and_lists_under_its_prefixes_only() -> None:
    scope = VendingScope((("lake", "sales/"),), (("lake", "cache/v3/part-0.parquet"),))
    policy = session_policy(scope)
    read, listing = policy["Statement"]
    assert read["Action"] == ["s3:GetObject"]
    assert read["Resource"] == ["arn:aws:s3:::lake/cache/v3/part-0.parquet", "arn:aws:s3:::lake/sales/*"]
    assert listing["Action"] == ["s3:ListBucket"] and listing["Resource"] == ["arn:aws:s3:::lake"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["sales/", "sales/*"]}}
    actions = {action for statement in policy["Statement"] for action in statement["Action"]}
    assert actions == {"s3:GetObject", "s3:ListBucket"}  # nothing that writes
    assert scope.allows("lake", "sales/x.parquet") and scope.allows("lake", "cache/v3/part-0.parquet")
    assert not scope.allows("lake", "salesman/x") and not scope.allows("other", "sales/x")
    assert json.loads(policy_text(scope)) == policy


def test_prefixes_are_normalized_and_nested_ones_dropped() -> None:
    assert prefixes_of([("b", "t"), ("b", "t/data/"), ("b", "u/"), ("", "x")]) == (("b", "t/"), ("b", "u/"))


def test_an_exact_scope_too_large_for_a_policy_falls_back_to_the_prefixes() -> None:
    loose = VendingScope((("lake", "t/"),))
    few = VendingScope((), (("lake", "t/a.parquet"),))
    assert narrowest(few, loose) == few
    many = VendingScope((), tuple(("lake", f"t/data/part-{i:05d}.parquet") for i in range(200)))
    assert len(policy_text(many)) > MAX_POLICY_CHARS
    assert narrowest(many, loose) == loose
    with pytest.raises(ValueError, match="over 2048 characters"):
        narrowest(None, VendingScope(tuple(("lake", f"table-{i:04d}/") for i in range(100))))


def test_vending_settings_are_checked() -> None:
    assert not VendingSettings().enabled and VendingSettings(mode="sts").duration == 900
    with pytest.raises(ValueError, match="credential_vending"):
        VendingSettings(mode="aws")
    with pytest.raises(ValueError, match="between 900 and 43200"):
        VendingSettings(mode="sts", duration=60)
