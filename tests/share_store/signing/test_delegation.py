"""Access delegation both catalogs hand out (`share_store.signing.delegation`): the mode an engine
gets and the properties it is given."""

from __future__ import annotations

from share_store.signing.delegation import (
    ACCESS_MODES,
    FSSPEC_IO,
    SIGNED,
    VENDED,
    chosen_mode,
    remote_signing_config,
    vended_config,
)


def test_the_engines_first_mode_that_is_offered_is_chosen() -> None:
    assert ACCESS_MODES == (VENDED, SIGNED)
    assert chosen_mode([SIGNED, VENDED], ACCESS_MODES) == SIGNED
    assert chosen_mode([VENDED, SIGNED], ACCESS_MODES) == VENDED
    assert chosen_mode(["something-else", VENDED], (SIGNED, VENDED)) == VENDED
    assert chosen_mode([SIGNED], (VENDED,)) is None
    assert chosen_mode([], ACCESS_MODES) is None


def test_remote_signing_points_both_clients_signers_at_the_catalog_in_path_style() -> None:
    config = remote_signing_config("http://server/iceberg", "v1/aws/s3/sign", "http://store:9000")
    assert config == {
        "py-io-impl": FSSPEC_IO,
        "s3.signer": "S3V4RestSigner",
        "s3.signer.uri": "http://server/iceberg",
        "s3.signer.endpoint": "v1/aws/s3/sign",
        "s3.remote-signing-enabled": "true",
        "s3.endpoint": "http://store:9000",
        "s3.path-style-access": "true",
    }


def test_vended_keys_are_handed_out_once_per_prefix() -> None:
    properties = {"s3.access-key-id": "ASIA", "s3.endpoint": "http://store:9000"}
    config, credentials = vended_config(properties, [("b", "t/"), ("b", "meta/")])
    assert config == properties
    assert credentials == [
        {"prefix": "s3://b/t/", "config": properties},
        {"prefix": "s3://b/meta/", "config": properties},
    ]
