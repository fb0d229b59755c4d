"""Catalog users' IAM-style policies (`share_store.catalog.policies`): parsing and IAM's evaluation."""

from __future__ import annotations

import json

import pytest

from share_store.catalog.policies import (
    ACTIONS,
    CREATE_NAMESPACE,
    CREATE_TABLE,
    DELETE_TABLE,
    FULL_ACCESS_POLICY,
    GET_NAMESPACE,
    GET_TABLE,
    GET_TABLE_BUCKET,
    GET_TABLE_DATA,
    LIST_NAMESPACES,
    LIST_TABLES,
    PUT_TABLE_DATA,
    READ_ONLY_EXAMPLE_POLICY,
    UPDATE_TABLE_METADATA_LOCATION,
    Policy,
    PolicyError,
    parse_policy,
    policies_allow,
    table_arn,
    warehouse_arn,
)
from share_store.errors import InvalidParameter

WAREHOUSE = warehouse_arn("my-warehouse")
TABLE = table_arn("my-warehouse", ["sales", "eu"], "orders")


def policy(*statements: dict[str, object]) -> Policy:
    return parse_policy(json.dumps({"Version": "2012-10-17", "Statement": list(statements)}))


def test_arns() -> None:
    assert WAREHOUSE == "arn:aws:s3tables:::bucket/my-warehouse"
    assert TABLE == "arn:aws:s3tables:::bucket/my-warehouse/table/sales.eu/orders"
    assert len(ACTIONS) == 25 and all(action.startswith("s3tables:") for action in ACTIONS)  # UndropTable too


def test_the_read_only_example_reads_its_warehouse_and_nothing_else() -> None:
    read_only = parse_policy(READ_ONLY_EXAMPLE_POLICY)
    for action in (GET_TABLE_BUCKET, LIST_NAMESPACES, GET_NAMESPACE, LIST_TABLES):
        assert read_only.allows(action, WAREHOUSE)
    assert read_only.allows(GET_TABLE, TABLE)
    assert read_only.allows(GET_TABLE, table_arn("my-warehouse", ["n"], "t"))
    # Writes, data and actions it does not list are denied by default.
    for action in (
        CREATE_NAMESPACE,
        CREATE_TABLE,
        DELETE_TABLE,
        UPDATE_TABLE_METADATA_LOCATION,
        PUT_TABLE_DATA,
    ):
        assert not read_only.allows(action, WAREHOUSE)
        assert not read_only.allows(action, TABLE)
    assert not read_only.allows(GET_TABLE_DATA, TABLE)
    # Other warehouses, including one whose name only starts the same.
    for other in ("other", "my-warehouse-2", "my-warehouse2"):
        assert not read_only.allows(GET_TABLE_BUCKET, warehouse_arn(other))
        assert not read_only.allows(GET_TABLE, table_arn(other, ["sales"], "orders"))


def test_full_access_allows_every_action_on_every_warehouse() -> None:
    full = parse_policy(FULL_ACCESS_POLICY)
    for action in ACTIONS:
        assert full.allows(action, WAREHOUSE) and full.allows(action, table_arn("w", ["a", "b"], "t"))
    assert not full.allows("s3:GetObject", WAREHOUSE)


def test_an_explicit_deny_wins_over_any_allow() -> None:
    mixed = policy(
        {"Effect": "Allow", "Action": "s3tables:*", "Resource": "*"},
        {
            "Effect": "Deny",
            "Action": "s3tables:Delete*",
            "Resource": "arn:aws:s3tables:::bucket/my-warehouse*",
        },
    )
    assert mixed.allows(CREATE_TABLE, TABLE)
    assert not mixed.allows(DELETE_TABLE, TABLE)
    assert mixed.allows(DELETE_TABLE, table_arn("other", ["n"], "t"))
    assert mixed.effect(DELETE_TABLE, TABLE) == "Deny"
    assert mixed.effect(DELETE_TABLE, "arn:aws:s3tables:::bucket/x") == "Allow"

    # Across policies too: the deny in one beats the allow in another, whatever the order.
    allow = parse_policy(FULL_ACCESS_POLICY)
    deny = policy({"Effect": "Deny", "Action": "s3tables:GetTable", "Resource": TABLE})
    assert not policies_allow([allow, deny], GET_TABLE, TABLE)
    assert not policies_allow([deny, allow], GET_TABLE, TABLE)
    assert policies_allow([deny, allow], GET_TABLE, table_arn("my-warehouse", ["sales"], "orders"))
    assert not policies_allow([deny], GET_TABLE, WAREHOUSE)
    assert not policies_allow([], GET_TABLE, WAREHOUSE)


def test_wildcards_in_actions_ignore_case_and_in_resources_do_not() -> None:
    getters = policy(
        {
            "Effect": "Allow",
            "Action": ["s3tables:get*", "S3TABLES:List?ables"],
            "Resource": ["arn:aws:s3tables:::bucket/wh-?/table/*", "arn:aws:s3tables:::bucket/Wh"],
        }
    )
    assert getters.allows(GET_TABLE, table_arn("wh-1", ["a", "b"], "t"))
    assert getters.allows("s3tables:GETTABLEDATA", table_arn("wh-1", ["a"], "t"))
    assert getters.allows(LIST_TABLES, table_arn("wh-x", ["a"], "t"))
    assert not getters.allows(LIST_NAMESPACES, table_arn("wh-x", ["a"], "t"))
    assert not getters.allows(GET_TABLE, table_arn("wh-10", ["a"], "t"))  # ? is one character
    assert getters.allows(GET_TABLE_BUCKET, "arn:aws:s3tables:::bucket/Wh")
    assert not getters.allows(GET_TABLE_BUCKET, "arn:aws:s3tables:::bucket/wh")
    # A resource is matched whole, so a warehouse's ARN does not cover its tables.
    assert not getters.allows(GET_TABLE, "arn:aws:s3tables:::bucket/Wh/table/n/t")
    # Regular expression characters are literal.
    dotted = policy(
        {"Effect": "Allow", "Action": "s3tables:GetTable", "Resource": f"{warehouse_arn('a.b')}/*"}
    )
    assert dotted.allows(GET_TABLE, table_arn("a.b", ["n"], "t"))
    assert not dotted.allows(GET_TABLE, table_arn("aXb", ["n"], "t"))


def test_a_single_statement_object_and_single_strings_are_read() -> None:
    single = parse_policy(
        {"Statement": {"Sid": "one", "Effect": "Allow", "Action": "s3tables:GetTable", "Resource": TABLE}}
    )
    assert single.allows(GET_TABLE, TABLE)
    assert single.statements[0].sid == "one"
    assert parse_policy(single.to_json()) == single
    assert parse_policy(READ_ONLY_EXAMPLE_POLICY.encode()) == parse_policy(READ_ONLY_EXAMPLE_POLICY)


ALLOW = {"Effect": "Allow", "Action": "s3tables:GetTable", "Resource": TABLE}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"Statement": [], "Statement": []}', "duplicate key 'Statement'"),
        ("[]", "must be a JSON object"),
        ({"Version": "2012-10-17"}, "has no Statement"),
        ({"Statement": []}, "non-empty list"),
        ({"Statement": "Allow"}, "non-empty list"),
        ({"Statement": [ALLOW], "Extra": 1}, "unsupported policy key 'Extra'"),
        ({"Version": "2020-01-01", "Statement": [ALLOW]}, "unknown policy Version"),
        ({"Version": ["2012-10-17"], "Statement": [ALLOW]}, "unknown policy Version"),
        ({"Statement": [{}]}, "statement 1: no Effect"),
        ({"Statement": [ALLOW, "x"]}, "statement 2 is not a JSON object"),
        ({"Statement": [{**ALLOW, "Effect": "allow"}]}, 'Effect \'allow\'; it must be "Allow" or "Deny"'),
        ({"Statement": [{**ALLOW, "Sid": "s1", "NotAction": "s3tables:GetTable"}]}, "'s1': NotAction is not"),
        ({"Statement": [{**ALLOW, "NotResource": "*"}]}, "NotResource is not supported"),
        ({"Statement": [{**ALLOW, "Principal": "*"}]}, "Principal is not supported"),
        ({"Statement": [{**ALLOW, "Condition": {}}]}, "Condition is not supported"),
        ({"Statement": [{**ALLOW, "Effects": "Allow"}]}, "unknown key 'Effects'"),
        ({"Statement": [{**ALLOW, "Sid": 3}]}, "Sid must be a string"),
        ({"Statement": [{"Effect": "Allow", "Resource": "*"}]}, "statement 1: no Action"),
        ({"Statement": [{"Effect": "Allow", "Action": "s3tables:*"}]}, "statement 1: no Resource"),
        ({"Statement": [{**ALLOW, "Action": []}]}, "Action must be a non-empty"),
        ({"Statement": [{**ALLOW, "Action": [""]}]}, "Action must be a non-empty"),
        ({"Statement": [{**ALLOW, "Resource": [1]}]}, "Resource must be a non-empty"),
        ({"Statement": [{**ALLOW, "Action": "s3:GetObject"}]}, "'s3:GetObject' is not an s3tables: action"),
        ({"Statement": [{**ALLOW, "Action": "*"}]}, 'for every action, "s3tables:\\*"'),
        ({"Statement": [{**ALLOW, "Action": "s3tables:GetTabel"}]}, "unknown action 's3tables:GetTabel'"),
        ({"Statement": [{**ALLOW, "Resource": "bucket/wh"}]}, "is not an ARN"),
        ({"Statement": [{**ALLOW, "Resource": "arn:aws:s3tables:::bucket"}]}, "is not an ARN|cannot name"),
        ({"Statement": [{**ALLOW, "Resource": "arn:aws:s3:::wh/*"}]}, "its service must be 's3tables'"),
        (
            {"Statement": [{**ALLOW, "Resource": "arn:aws:s3tables:us-east-1:1234:bucket/wh"}]},
            "region must be empty",
        ),
        ({"Statement": [{**ALLOW, "Resource": "arn:aws:s3tables:::wh/table/*"}]}, "cannot name a warehouse"),
        (
            {"Statement": [{**ALLOW, "Resource": "arn:aws:s3tables:::bucket/${aws:username}"}]},
            "policy variables",
        ),
    ],
)
def test_what_the_catalog_does_not_read_is_refused(document: str | dict[str, object], message: str) -> None:
    with pytest.raises(PolicyError, match=message) as caught:
        parse_policy(document)
    assert isinstance(caught.value, InvalidParameter) and caught.value.status_code == 400
    assert "\n" not in caught.value.message


def test_known_actions_in_any_case_and_wildcard_patterns_are_taken() -> None:
    taken = policy(
        {
            "Effect": "Allow",
            "Action": ["S3Tables:gettable", "s3tables:*Namespace*", "s3tables:Nothing*"],
            "Resource": ["arn:aws:s3tables:*:*:bucket/*", "arn:*", "*"],
        }
    )
    assert taken.allows(GET_TABLE, TABLE) and taken.allows("s3tables:UpdateNamespaceProperties", WAREHOUSE)
