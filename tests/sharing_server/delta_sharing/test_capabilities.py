"""Unit tests of `sharing_server.delta_sharing.capabilities`, without HTTP.

Covered: `Capabilities.parse` and `Capabilities.response_format` (the
`delta-sharing-capabilities` header and the format chosen from it), and
`parse_file_id_hash`.
"""

from __future__ import annotations

import pytest

from share_store.errors import InvalidParameter
from sharing_server.delta_sharing.capabilities import Capabilities, parse_file_id_hash

# -- Capabilities -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, Capabilities()),
        ("", Capabilities()),
        ("responseformat=delta", Capabilities(response_formats=("delta",))),
        ("ResponseFormat=Delta,PARQUET", Capabilities(response_formats=("delta", "parquet"))),
        (" responseformat = parquet , delta ", Capabilities(response_formats=("parquet", "delta"))),
        ("responseformat=", Capabilities()),
        ("responseformat=,,", Capabilities()),
        # Malformed entries are dropped, the rest is kept.
        (
            "responseformat;readerfeatures=deletionvectors",
            Capabilities(reader_features=frozenset({"deletionvectors"})),
        ),
        ("responseformat=delta=parquet", Capabilities()),
        ("garbage;responseformat=delta;x=y=z", Capabilities(response_formats=("delta",))),
        ("unknownkey=1;responseformat=delta", Capabilities(response_formats=("delta",))),
        (
            "responseformat=delta;readerfeatures=deletionVectors,columnMapping",
            Capabilities(
                response_formats=("delta",), reader_features=frozenset({"deletionvectors", "columnmapping"})
            ),
        ),
        ("includeendstreamaction=true", Capabilities(include_end_stream_action=True)),
        ("IncludeEndStreamAction=TRUE", Capabilities(include_end_stream_action=True)),
        ("includeendstreamaction=false", Capabilities()),
        ("includeendstreamaction=yes", Capabilities()),
        (
            "responseformat=parquet;includeendstreamaction=true",
            Capabilities(response_formats=("parquet",), include_end_stream_action=True),
        ),
        # The last of a repeated key wins.
        ("responseformat=delta;responseformat=parquet", Capabilities(response_formats=("parquet",))),
        # An empty value is no value: the default, not a 500.
        ("includeendstreamaction=", Capabilities()),
    ],
)
def test_capabilities_parse(header: str | None, expected: Capabilities) -> None:
    assert Capabilities.parse(header) == expected


@pytest.mark.parametrize(
    ("formats", "min_reader_version", "expected"),
    [
        (("delta",), 1, "delta"),
        (("delta",), 3, "delta"),
        (("parquet",), 1, "parquet"),
        (("parquet",), 3, "parquet"),  # refused later, when the table needs more than parquet can say
        (("delta", "parquet"), 1, "parquet"),
        (("parquet", "delta"), 1, "parquet"),
        (("delta", "parquet"), 2, "delta"),
        (("parquet", "delta"), 3, "delta"),
        (("delta", "delta"), 1, "delta"),
    ],
)
def test_response_format(formats: tuple[str, ...], min_reader_version: int, expected: str) -> None:
    assert Capabilities(response_formats=formats).response_format(min_reader_version) == expected


@pytest.mark.parametrize(
    ("formats", "min_reader_version", "expected"),
    [
        (("delta", "parquet"), 1, "delta"),  # the Python client's auto-resolution
        (("parquet", "delta"), 1, "parquet"),  # Delta Lake's Spark connector: as the reference
        (("parquet",), 1, "parquet"),
        (("delta", "parquet"), 3, "delta"),
        (("parquet", "delta"), 3, "delta"),
    ],
)
def test_response_format_preferring_delta(
    formats: tuple[str, ...], min_reader_version: int, expected: str
) -> None:
    capabilities = Capabilities(response_formats=formats)
    assert capabilities.response_format(min_reader_version, prefer_delta=True) == expected


@pytest.mark.parametrize(
    ("formats", "message"),
    [
        (("json",), "Unsupported responseformat: json. Supported: parquet, delta"),
        (("parquet", "orc", "avro"), "Unsupported responseformat: avro, orc. Supported: parquet, delta"),
    ],
)
def test_response_format_refuses_unknown_formats(formats: tuple[str, ...], message: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        Capabilities(response_formats=formats).response_format(1)
    assert raised.value.message == message


def test_parsed_unknown_format_is_refused_when_chosen() -> None:
    capabilities = Capabilities.parse("responseformat=Delta,Iceberg")
    with pytest.raises(InvalidParameter) as raised:
        capabilities.response_format(1)
    assert raised.value.message == "Unsupported responseformat: iceberg. Supported: parquet, delta"


# -- parse_file_id_hash ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, None), ("parquet", "parquet"), ("delta", "delta"), (" Delta ", "delta"), ("PARQUET", "parquet")],
)
def test_parse_file_id_hash(header: str | None, expected: str | None) -> None:
    assert parse_file_id_hash(header) == expected


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("md5", "Unsupported fileidhash: 'md5'. Supported: parquet, delta"),
        ("", "Unsupported fileidhash: ''. Supported: parquet, delta"),
        (" Sha256 ", "Unsupported fileidhash: ' Sha256 '. Supported: parquet, delta"),
    ],
)
def test_parse_file_id_hash_refusals(header: str, message: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        parse_file_id_hash(header)
    assert raised.value.message == message
