"""Writers' access delegation: an append with vended keys, and with remote signing, against one
with the store's static keys, on the same server and table layout (`[warehouses] access_delegation`).

Three pyiceberg clients of our catalog on SeaweedFS, interleaved: static S3 keys (as AIStor's
documentation configures pyiceberg), no S3 keys with `vended-credentials`, no S3 keys with
`remote-signing`. Each appends 10 rows `sizes.appends` times; the rows give the medians and each
mode's ratio to the static keys'. Vended keys cost an STS call per table load (kept while more
than half their life is left); remote signing costs one signing request per S3 request.
"""

from __future__ import annotations

import time

from bench.results import record
from bench.servers import running_seaweed
from bench.timing import ratio_row
from bench.warehouse_catalog import PREFIX, Sizes, create, describe, ms_stats, rows, sizes_from_env
from bench.warehouse_sides import our_side
from testbed.seaweed import WRITER_ROLE_ARN

MODES = {"static keys": None, "vended keys": "vended-credentials", "remote signing": "remote-signing"}


def bench_delegation(sizes: Sizes | None = None) -> None:
    sizes = sizes or sizes_from_env()
    env = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": "vended-credentials,remote-signing",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    with running_seaweed() as seaweed, our_side(seaweed, env, "run-delegation") as (side, _pid):
        tables = {}
        for label, mode in MODES.items():
            if mode is None:
                catalog = side.connect()
            else:
                catalog = side.connect(s3_keys=False, **{"header.X-Iceberg-Access-Delegation": mode})
            try:
                table = create(catalog, f"appends_{label.split()[0]}")
                table.append(rows(0, 10))  # untimed: the first append writes the first manifest list
                tables[label] = table
            except Exception as error:  # noqa: BLE001 - the row says why the mode is missing
                record(f"{PREFIX}: append with {label}", f"- ({describe(error)})")
        times: dict[str, list[float]] = {label: [] for label in tables}
        for n in range(1, sizes.appends + 1):
            for label, table in tables.items():
                start = time.perf_counter()
                table.append(rows(n * 10, 10))
                times[label].append(time.perf_counter() - start)
    if "static keys" not in times:
        return
    static, _ = ms_stats(times["static keys"])
    for label, taken in times.items():
        median, p95 = ms_stats(taken)
        what = f"{PREFIX}: append 10 rows (of {sizes.appends}) with {label}, median / p95"
        record(what, f"{median:.1f} / {p95:.1f} ms")
        if label != "static keys":
            ratio_row(f"{PREFIX}: append with {label} / with static keys, medians", median / static, 1.5)


SIGNATURES = 300


def _signer_of(table: object) -> tuple[str, str]:
    """The signer URL a remote-signing load handed out, and a file of the table to sign a read of."""
    properties = table.io.properties  # type: ignore[attr-defined]
    signer = f"{properties['s3.signer.uri']}/{properties['s3.signer.endpoint']}"
    data = next(iter(table.scan().plan_files())).file.file_path  # type: ignore[attr-defined]
    return signer, f"{properties['s3.endpoint']}/{data.removeprefix('s3://')}"


def bench_signing_keys(count: int = SIGNATURES) -> None:
    """One writer's signature made with keys from STS scoped to the table (vending on: the store
    bounds the signature too) against one made with the server's own keys (remote signing alone),
    on two servers of one SeaweedFS, interleaved; the scoped keys are kept for their life, so
    what is timed is the signing request as engines send it, STS's call amortised."""
    import httpx

    scoped_env = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": "vended-credentials,remote-signing",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    own_env = {"SHARING_WAREHOUSES_ACCESS_DELEGATION": "remote-signing"}
    with (
        running_seaweed() as seaweed,
        our_side(seaweed, scoped_env, "run-signing-scoped") as (scoped, _),
        our_side(seaweed, own_env, "run-signing-own", "benchown") as (own, _),
        httpx.Client() as client,
    ):
        targets = {}
        for label, side in (("scoped keys", scoped), ("server's keys", own)):
            catalog = side.connect(s3_keys=False, **{"header.X-Iceberg-Access-Delegation": "remote-signing"})
            table = create(catalog, "signed")
            table.append(rows(0, 10))
            targets[label] = _signer_of(catalog.load_table(table.name()))
        times: dict[str, list[float]] = {label: [] for label in targets}
        for _ in range(count):
            for label, (signer, uri) in targets.items():
                body = {"method": "GET", "region": "us-east-1", "uri": uri, "headers": {}}
                start = time.perf_counter()
                answer = client.post(signer, json=body)
                times[label].append(time.perf_counter() - start)
                if answer.status_code != 200:
                    raise RuntimeError(f"signing with {label}: {answer.status_code} {answer.text[:200]}")
    medians = {}
    for label, taken in times.items():
        medians[label], p95 = ms_stats(taken)
        record(f"{PREFIX}: one signature with {label}, median / p95", f"{medians[label]:.2f} / {p95:.2f} ms")
    ratio = medians["scoped keys"] / medians["server's keys"]
    ratio_row(f"{PREFIX}: a signature with scoped keys / with the server's keys, medians", ratio, 1.2)
