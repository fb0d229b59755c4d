"""Access delegation, as the Iceberg REST spec has it: how an engine reaches a table's files
without the server's storage keys, for both catalogs (recipients at `/iceberg`, writers at
`/_iceberg`).

An engine lists the modes it can use (the `X-Iceberg-Access-Delegation` header, read by
`sharing_server.http.access_delegation`): `vended-credentials`, temporary keys whose session
policy bounds them to the table (`storage.sts_vending`), or `remote-signing`, each S3 request
sent to the catalog, which signs a request it builds itself (`signing.request_signing`). Which
modes a catalog offers, and what each grant reaches, is its own (`iceberg_shares.grants`,
`catalog.data_access`); the choice of a mode and the properties handed to the engine are the same
for both, and live here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

VENDED = "vended-credentials"
SIGNED = "remote-signing"
ACCESS_MODES = (VENDED, SIGNED)
#: pyiceberg's remote signing lives in its fsspec FileIO, not in its default pyarrow one.
FSSPEC_IO = "pyiceberg.io.fsspec.FsspecFileIO"


def chosen_mode(asked: Sequence[str], offered: Collection[str]) -> str | None:
    """The first mode the engine lists (its order is its preference) that the catalog offers;
    None when it offers none of them."""
    return next((mode for mode in asked if mode in offered), None)


def remote_signing_config(signer_uri: str, signer_path: str, endpoint: str) -> dict[str, str]:
    """A load answer's `config` for remote signing: the engine sends each S3 request for
    `endpoint` (in path style, the only addressing the signers sign) to `signer_uri` +
    `signer_path`, for both pyiceberg's signer and the Java client's."""
    return {
        "py-io-impl": FSSPEC_IO,
        "s3.signer": "S3V4RestSigner",
        "s3.signer.uri": signer_uri,
        "s3.signer.endpoint": signer_path,
        "s3.remote-signing-enabled": "true",  # the Java client's switch
        "s3.endpoint": endpoint,
        "s3.path-style-access": "true",
    }


def vended_config(
    properties: Mapping[str, str], prefixes: Iterable[tuple[str, str]]
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """A load answer's `config` and the spec's `storage-credentials` for vended keys (their FileIO
    `properties`): the same keys once per (bucket, prefix), since engines pick keys by the longest
    prefix of a file's path. The session policy, not the prefix, is what bounds the keys."""
    config = dict(properties)
    credentials = [{"prefix": f"s3://{bucket}/{prefix}", "config": config} for bucket, prefix in prefixes]
    return config, credentials
