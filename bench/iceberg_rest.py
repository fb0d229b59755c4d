"""The Iceberg REST facade (`/iceberg`): load-table and signing latency, and a scan through it.

A table of `files` small data files in SeaweedFS, in a SQL catalog on S3, is
shared and read by pyiceberg twice side by side: through the facade (the
recipient's way: no storage keys, every object read signed by the server) and
directly with the store's keys. The difference is the price of remote signing.
"""

from __future__ import annotations

import io
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pyarrow.parquet as pq
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog

from bench.delta_tables import make_delta_table
from bench.paths import DATA
from bench.results import record
from bench.rows import sample_rows
from bench.servers import Server, running_seaweed
from bench.timing import ratio_row
from testbed.seaweed import upload_tree

BUCKET = "icebergrest"


def _median_ms(action: Any, times: int) -> float:
    durations = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        durations.append(time.perf_counter() - start)
    return statistics.median(durations) * 1000


def bench_iceberg_rest(files: int) -> None:
    with running_seaweed() as seaweed:
        s3 = seaweed.client()
        s3.create_bucket(Bucket=BUCKET)
        server = Server("run-iceberg-rest", seaweed.storage_config(path_style="true"))
        server.state.mkdir(parents=True, exist_ok=True)
        catalog_props = {
            "type": "sql",
            "uri": f"sqlite:///{server.state / 'iceberg.db'}",
            "warehouse": f"s3://{BUCKET}/wh",
            "s3.endpoint": seaweed.endpoint,
            "s3.access-key-id": seaweed.access_key,
            "s3.secret-access-key": seaweed.secret_key,
            "s3.region": seaweed.region,
        }
        # Quoted keys: `s3.endpoint` bare would be a nested table in TOML.
        quoted = "".join(f"{json.dumps(key)} = {json.dumps(value)}\n" for key, value in catalog_props.items())
        server.config.write_text(server.config.read_text() + "\n[catalogs.wh]\n" + quoted)
        catalog = SqlCatalog("wh", **{k: v for k, v in catalog_props.items() if k != "type"})
        catalog.create_namespace("bench")
        table = catalog.create_table("bench.many", sample_rows().schema)
        buffer = io.BytesIO()
        pq.write_table(sample_rows(), buffer)
        body = buffer.getvalue()
        keys = [f"wh/bench.db/many/data/part-{i:06d}.parquet" for i in range(files)]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: s3.put_object(Bucket=BUCKET, Key=key, Body=body), keys))
        table.add_files([f"s3://{BUCKET}/{key}" for key in keys])
        # A Delta table of as many files (its log only: loading reads no data file).
        delta = DATA / "buckets" / "bench" / f"t{files // 1000}k"
        make_delta_table(delta, files)
        upload_tree(s3, delta / "_delta_log", BUCKET, "deltamany/_delta_log")
        _, token = server.share({"many": "uniform:wh:bench:many", "deltamany": f"delta:{BUCKET}:deltamany"})
        with server:
            uri = server.base_url.removesuffix("/delta-sharing") + "/iceberg"
            recipient = RestCatalog("bench", uri=uri, token=token)
            recipient.load_table("default.many")  # the first load warms the server's grant
            load_ms = _median_ms(lambda: recipient.load_table("default.many"), 20)
            record("Iceberg REST: load table (warm, median of 20)", f"{load_ms:.1f} ms")
            start = time.perf_counter()
            recipient.load_table("default.deltamany")
            first_ms = (time.perf_counter() - start) * 1000
            warm_ms = _median_ms(lambda: recipient.load_table("default.deltamany"), 5)
            record(
                f"Iceberg REST: load a {files:,}-file Delta table, first (metadata generated) / again",
                f"{first_ms:.0f} / {warm_ms:.1f} ms",
            )
            shared = recipient.load_table("default.many")
            data_file = next(iter(shared.scan().plan_files())).file.file_path
            url = f"{seaweed.endpoint}/{data_file.removeprefix('s3://')}"
            request = {"method": "GET", "region": seaweed.region, "uri": url, "headers": {}}
            with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as client:
                signed = client.post(f"{uri}/v1/aws/s3/sign", json=request)
                assert signed.status_code == 200, signed.text
                sign_ms = _median_ms(lambda: client.post(f"{uri}/v1/aws/s3/sign", json=request), 200)
                # The same token's cheapest request: what every call pays for HTTP and the token,
                # so that the difference is the signer's own price per call.
                stack_ms = _median_ms(lambda: client.get(f"{uri}/v1/config"), 200)
            record("Iceberg REST: sign one object read (median of 200)", f"{sign_ms:.2f} ms")
            record(
                "Iceberg REST: sign one object read, of which the signer's own (over GET /v1/config)",
                f"{sign_ms - stack_ms:.2f} ms (config {stack_ms:.2f} ms)",
            )
            start = time.perf_counter()
            through = shared.scan().to_arrow()
            through_s = time.perf_counter() - start
            start = time.perf_counter()
            direct = catalog.load_table("bench.many").scan().to_arrow()
            direct_s = time.perf_counter() - start
            # The same FileIO as the facade's client, with the keys: what s3fs costs, signing aside.
            fsspec_catalog = SqlCatalog("wh", **{k: v for k, v in catalog_props.items() if k != "type"},
                                        **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})  # fmt: skip
            start = time.perf_counter()
            with_fsspec = fsspec_catalog.load_table("bench.many").scan().to_arrow()
            fsspec_s = time.perf_counter() - start
            assert through.num_rows == direct.num_rows == with_fsspec.num_rows
            record(
                f"Iceberg REST: scan of {files:,} files, direct with pyiceberg's fsspec FileIO (keys)",
                f"{fsspec_s:.2f} s",
            )
            record(
                f"Iceberg REST: scan of {files:,} files, facade (remote signing) / direct (keys)",
                f"{through_s:.2f} / {direct_s:.2f} s",
            )
            # Issue 54's goal is against pyarrow's FileIO with keys; pyiceberg signs remotely only
            # through its fsspec FileIO, whose cost with keys alone is the row above, so the second
            # ratio is signing's own price, the same FileIO on both sides.
            ratio_row(f"Iceberg REST: scan of {files:,} files: facade / direct (pyarrow FileIO, keys)",
                      through_s / direct_s, 2.0)  # fmt: skip
            ratio_row(
                f"Iceberg REST: scan of {files:,} files: facade / direct with the same fsspec FileIO (keys)",
                through_s / fsspec_s,
                None,
            )
