"""The documented catalog grammar, mapped to pyiceberg's keys: each backend, auth type and storage key,
and one clear line per mistake."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from share_store.errors import CatalogError
from share_store.table_sources.grammar import jdbc_uri
from share_store.table_sources.settings import catalog_settings

ARN = "arn:aws:s3tables:us-east-1:123:bucket/t"
REST = {"catalog_url": "http://c", "warehouse": "w"}


def settings(text: str, name: str = "x") -> dict[str, str]:
    return catalog_settings(name, tomllib.loads(text)["catalogs"][name])


def test_the_issues_example_as_written() -> None:
    props = settings("""
[catalogs.x]
catalog_url = "https://partner.example.com/iceberg"
warehouse = "shared"
[catalogs.x.backend]
type = "rest"
[catalogs.x.auth]
type = "client_credentials"
token_endpoint = "https://partner.example.com/oauth/tokens"
client_id = "sharing"
client_secret = "${PARTNER_SECRET}"
[catalogs.x.storage]
s3_endpoint = "https://partner-s3.example.com"
s3_region = "us-east-1"
s3_access_key = "AK"
s3_secret_key = "SK"
s3_path_style = true
s3_allow_http = false
""")
    oauth2 = json.loads(props.pop("sharing.auth"))["oauth2"]
    assert oauth2["client_id"] == "sharing" and oauth2["client_secret"] == "${PARTNER_SECRET}"
    assert oauth2["token_url"] == "https://partner.example.com/oauth/tokens"
    assert props == {
        "type": "rest", "uri": "https://partner.example.com/iceberg", "warehouse": "shared",
        "s3.endpoint": "https://partner-s3.example.com", "s3.region": "us-east-1",
        "s3.access-key-id": "AK", "s3.secret-access-key": "SK", "s3.force-virtual-addressing": "false",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({"catalog_url": "http://c/iceberg", "warehouse": "w"}, {"type": "rest", "uri": "http://c/iceberg"}),
        ({"backend": {"type": "hms"}, "uri": "meta:9083", "warehouse": "s3a://b/wh"},
         {"type": "hive", "uri": "thrift://meta:9083", "warehouse": "s3a://b/wh"}),
        ({"backend": {"type": "glue", "region": "eu-west-1", "warehouse": "s3://wh/"}},
         {"type": "glue", "glue.region": "eu-west-1", "warehouse": "s3://wh/"}),
        ({"backend": {"type": "glue", "region": "us-east-1", "warehouse": "s3://wh/",
                      "endpoint": "http://127.0.0.1:5000"}},
         {"glue.endpoint": "http://127.0.0.1:5000"}),
        ({"backend": {"type": "jdbc"}, "url": "postgres://u@h/db", "warehouse": "file:///wh"},
         {"type": "sql", "uri": "postgresql+psycopg://u@h/db"}),
        ({"backend": {"type": "s3tables"}, "table_bucket_arn": ARN, "endpoint_url": "http://127.0.0.1:8333"},
         {"sharing.backend": "s3tables", "sharing.table-bucket-arn": ARN,
          "client.region": "us-east-1", "sharing.endpoint-url": "http://127.0.0.1:8333"}),
        ({"backend": {"type": "hadoop", "warehouse": "s3://lake/wh"}},
         {"sharing.backend": "hadoop", "warehouse": "s3://lake/wh"}),
    ],
)  # fmt: skip
def test_each_backend_maps_to_the_keys_its_catalog_takes(
    block: dict[str, Any], expected: dict[str, str]
) -> None:
    props = catalog_settings("x", block)
    assert {key: props.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("url", "uri"),
    [
        ("sqlite:path/to/file.db", "sqlite:///path/to/file.db"),
        ("sqlite:/abs/file.db", "sqlite:////abs/file.db"),
        ("sqlite:///already.db", "sqlite:///already.db"),
        ("postgresql://u:p@h:5432/db", "postgresql+psycopg://u:p@h:5432/db"),
        ("jdbc:postgresql://h/db", "postgresql+psycopg://h/db"),
        ("mysql://root@127.0.0.1:3306/iceberg", "mysql+pymysql://root@127.0.0.1:3306/iceberg"),
    ],
)
def test_the_jdbc_url_prefix_picks_the_driver(url: str, uri: str) -> None:
    assert jdbc_uri("x", url) == uri


def test_auth_types_for_rest() -> None:
    base = {"catalog_url": "http://c/iceberg", "warehouse": "w"}
    assert json.loads(catalog_settings("x", base)["sharing.auth"]) == {"type": "noop"}  # no header at all
    anonymous = catalog_settings("x", {**base, "auth": {"type": "anonymous"}})
    assert json.loads(anonymous["sharing.auth"]) == {"type": "noop"}
    assert catalog_settings("x", {**base, "auth": {"type": "static", "token": "t0k"}})["token"] == "t0k"
    aws = catalog_settings("x", {**base, "auth": {"type": "aws", "signing_name": "s3tables"}})
    assert aws["rest.sigv4-enabled"] == "true" and aws["rest.signing-name"] == "s3tables"
    glue = catalog_settings(
        "x", {"backend": {"type": "glue", "region": "r", "warehouse": "w"}, "auth": {"type": "aws"}}
    )
    assert "glue.access-key-id" not in glue  # the AWS provider chain


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"backend": {"type": "oracle"}, "warehouse": "w"}, r"backend\] type: 'oracle' is not a"),
        ({"catalog_url": "http://c", "warehouse": "w", "auth": {"type": "kerberos"}},
         r"\[catalogs.x.auth\] type: 'kerberos' is not an auth type"),
        ({"catalog_url": "http://c"}, r"\[catalogs.x\] warehouse: missing, and a rest backend needs it"),
        ({"backend": {"type": "glue", "warehouse": "w"}}, r"region: missing, and a glue backend needs it"),
        ({"backend": {"type": "s3tables"}}, r"table_bucket_arn: missing"),
        ({"backend": {"type": "jdbc"}, "warehouse": "w"}, r"url: missing, and a jdbc backend needs it"),
        ({"backend": {"type": "hadoop"}}, r"warehouse: missing, and a hadoop backend needs it"),
        ({"backend": {"type": "hms"}, "uri": "h:9083"}, r"warehouse: missing, and a hms backend needs it"),
        ({"catalog_url": "http://c", "warehouse": "w", "s3.endpoint": "http://s"},
         r"s3.endpoint: a block written in the documented grammar .* may not mix"),
        ({**REST, "type": "rest"}, r"type goes in \[catalogs.x.backend\]"),
        ({"catalog_url": "http://c", "warehouse": "w", "auth": {"type": "session_bearer"}},
         r"session_bearer .* this server has no end-user session"),
        ({**REST, "auth": {"type": "client_credentials", "client_id": "a"}},
         r"token_endpoint: missing, and client_credentials auth needs it"),
        ({"backend": {"type": "hadoop", "warehouse": "w"}, "auth": {"type": "static", "token": "t"}},
         r"static auth is for REST catalogs, not hadoop"),
        ({**REST, "storage": {"s3_endpoint": "http://s", "s3_allow_http": False}},
         r"plain http, and s3_allow_http = false"),
        ({"catalog_url": "http://c", "warehouse": "w", "storage": {"s3_bucket": "b"}},
         r"\[catalogs.x.storage\] s3_bucket: not a key of storage"),
        ({"backend": {"type": "s3tables"}, "table_bucket_arn": "arn:aws:s3:::b"}, r"not a table bucket ARN"),
        ({"backend": {"type": "jdbc"}, "url": "oracle://h", "warehouse": "w"}, r"a jdbc url starts with"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_line_naming_the_catalog_and_the_key(block: dict[str, Any], message: str) -> None:
    with pytest.raises(CatalogError, match=message) as raised:
        catalog_settings("x", block)
    assert "\n" not in raised.value.message


def test_the_pyiceberg_key_form_still_works_beside_the_grammar() -> None:
    assert catalog_settings("x", {"type": "rest", "uri": "http://c", "warehouse": "w"})["uri"] == "http://c"


# -- the documentation's multi-catalog example: an empty catalog_url on non-REST blocks -------------

#: One block per non-REST backend, as the documentation writes them (`catalog_url = ""` beside them).
NON_REST = {
    "glue": {"backend": {"type": "glue", "region": "eu-west-1", "warehouse": "s3://my-bucket/wh"}},
    "s3tables": {"backend": {"type": "s3tables", "table_bucket_arn": ARN}},
    "hms": {"backend": {"type": "hms", "uri": "metastore.example.com:9083", "warehouse": "s3a://b/wh"}},
    "jdbc": {"backend": {"type": "jdbc", "url": "sqlite:/tmp/x.db", "warehouse": "file:///wh"}},
    "hadoop": {"backend": {"type": "hadoop", "warehouse": "/data/wh"}},
}


@pytest.mark.parametrize("backend", sorted(NON_REST))
def test_an_empty_catalog_url_on_a_non_rest_backend_is_ignored(backend: str) -> None:
    block = NON_REST[backend]
    expected = catalog_settings("x", block)
    assert catalog_settings("x", {"catalog_url": "", **block}) == expected
    inside = {"backend": {**block["backend"], "catalog_url": ""}}
    assert catalog_settings("x", inside) == expected


@pytest.mark.parametrize("backend", sorted(NON_REST))
def test_a_catalog_url_on_a_non_rest_backend_is_refused_naming_the_key(backend: str) -> None:
    with pytest.raises(CatalogError) as raised:
        catalog_settings("x", {"catalog_url": "https://glue.example.com/iceberg", **NON_REST[backend]})
    message = raised.value.message
    assert message.startswith(f"[catalogs.x] catalog_url: a {backend} backend has no catalog URL")
    assert "glue.example.com" not in message and "\n" not in message


def test_an_empty_catalog_url_on_a_rest_backend_is_missing() -> None:
    with pytest.raises(CatalogError, match=r"\[catalogs.x\] catalog_url: missing, and a rest backend needs"):
        catalog_settings("x", {"catalog_url": "", "warehouse": "w"})


def test_the_documentations_example_as_written() -> None:
    text = """
[catalogs.aws_glue]
catalog_url = ""
[catalogs.aws_glue.backend]
type = "glue"
region = "eu-west-1"
warehouse = "s3://my-bucket/wh"
[catalogs.aws_s3tables]
catalog_url = ""
[catalogs.aws_s3tables.backend]
type = "s3tables"
table_bucket_arn = "arn:aws:s3tables:eu-west-2:111122223333:bucket/my-bucket"
[catalogs.legacy_hms]
catalog_url = ""
[catalogs.legacy_hms.backend]
type = "hms"
uri = "metastore.example.com:9083"
warehouse = "s3a://my-bucket/wh"
"""
    blocks = tomllib.loads(text)["catalogs"]
    props = {name: catalog_settings(name, block) for name, block in blocks.items()}
    assert props == {
        "aws_glue": {"type": "glue", "glue.region": "eu-west-1", "warehouse": "s3://my-bucket/wh"},
        "aws_s3tables": {
            "sharing.backend": "s3tables",
            "sharing.table-bucket-arn": "arn:aws:s3tables:eu-west-2:111122223333:bucket/my-bucket",
            "client.region": "eu-west-2",
        },
        "legacy_hms": {
            "type": "hive",
            "uri": "thrift://metastore.example.com:9083",
            "warehouse": "s3a://my-bucket/wh",
        },
    }


# -- converted once: what the grammar makes is taken back unchanged --------------------------------

CONVERTED_ONCE = [
    {**REST, "auth": {"type": "client_credentials", "token_endpoint": "http://t", "client_id": "a",
                      "client_secret": "${S}", "scope": "read"}},
    {**REST, "auth": {"type": "static", "token": "t0k"}},
    {**REST, "auth": {"type": "aws", "signing_name": "s3tables", "signing_region": "us-east-1"}},
    {**REST, "storage": {"s3_endpoint": "http://s", "s3_access_key": "AK", "s3_secret_key": "SK",
                         "s3_path_style": True}},
    {"catalog_url": "", **NON_REST["glue"], "auth": {"type": "aws"}},
    {**NON_REST["s3tables"], "endpoint_url": "http://127.0.0.1:8333", "warehouse": "w",
     "storage": {"s3_region": "us-east-1"}},
    {"catalog_url": "", **NON_REST["hms"]},
    {**NON_REST["jdbc"]},
    {"catalog_url": "", **NON_REST["hadoop"], "storage": {"s3_endpoint": "http://s"}},
]  # fmt: skip


@pytest.mark.parametrize("block", CONVERTED_ONCE)
def test_a_converted_block_is_taken_back_unchanged(block: dict[str, Any]) -> None:
    """The configuration converts each block when it is read, and the registry checks it again."""
    converted = catalog_settings("x", block)
    assert catalog_settings("x", converted) == converted


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"sharing.backend": "hadop", "warehouse": "w"}, r"sharing.backend: 'hadop' is not one of ours"),
        ({"sharing.backend": "hadoop"}, r"\[catalogs.x\] warehouse: missing, and a hadoop catalog needs it"),
        ({"sharing.backend": "s3tables"}, r"sharing.table-bucket-arn: missing, and a s3tables catalog needs"),
        ({"sharing.backend": "s3tables", "sharing.table-bucket-arn": "arn:aws:s3:::b"},
         r"\[catalogs.x\] sharing.table-bucket-arn: not a table bucket ARN"),
        ({"sharing.backend": "hadoop", "warehouse": "w", "type": "rest"},
         r"\[catalogs.x\] type: pyiceberg's catalog, beside sharing.backend, our own; set one of them"),
    ],
)  # fmt: skip
def test_a_converted_block_that_is_wrong_is_refused_naming_the_key(
    block: dict[str, Any], message: str
) -> None:
    with pytest.raises(CatalogError, match=message) as raised:
        catalog_settings("x", block)
    assert "\n" not in raised.value.message
