"""Prometheus metrics, served at `/metrics`.

Labels are route names, methods, statuses and error codes only: never share,
table or token names, so cardinality stays fixed and nothing a recipient sent
appears. Each app gets its own registry (tests run several apps in one
process). With several Hypercorn workers, `serve` points
`PROMETHEUS_MULTIPROC_DIR` at a directory of its own: each worker then keeps
its figures there, and `/metrics`, whichever worker answers, sums them all.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import Response

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RESOLUTION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "sharing_requests",
            "Requests answered, by route, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "sharing_request_duration_seconds",
            "Time from request to the last byte of the response, by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.files = Counter(
            "sharing_files_served",
            "File actions (each with a presigned URL) returned, by route.",
            ["route"],
            registry=self.registry,
        )
        self.response_bytes = Counter(
            "sharing_response_bytes", "Response body bytes sent, by route.", ["route"], registry=self.registry
        )
        self.errors = Counter(
            "sharing_errors",
            "Error responses by errorCode.",
            ["code"],
            registry=self.registry,
        )
        self.snapshot_warms = Counter(
            "sharing_snapshot_warms",
            "Background snapshot builds by why (start, refresh) and outcome (built, current: no new "
            "commit since the last round, failed); and the missing-file checks made ahead of queries "
            "(why check: passed, failed, deferred: over the time share checks may take).",
            ["why", "outcome"],
            registry=self.registry,
        )
        self.snapshot_warm_seconds = Histogram(
            "sharing_snapshot_warm_seconds",
            "Time to bring one table's snapshot up to date in the background.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.iceberg_signatures = Counter(
            "sharing_iceberg_signatures",
            "Iceberg REST remote-signing requests, by outcome (signed, refused).",
            ["outcome"],
            registry=self.registry,
        )
        self.iceberg_vended = Counter(
            "sharing_iceberg_vended_credentials",
            "Iceberg REST loads answered with keys from the store's STS, by outcome (vended, refused).",
            ["outcome"],
            registry=self.registry,
        )
        self.equality_resolution = Histogram(
            "sharing_iceberg_equality_delete_resolution_seconds",
            "Time spent resolving an Iceberg snapshot's equality deletes to row positions, by outcome "
            "(resolved, over_budget, refused, failed).",
            ["outcome"],
            buckets=RESOLUTION_BUCKETS,
            registry=self.registry,
        )
        self.equality_scanned = Counter(
            "sharing_iceberg_equality_delete_scanned_bytes",
            "Bytes of data files whose equality columns were read to resolve equality deletes.",
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "sharing_rate_limited",
            "Requests refused with 429, by the limit that refused them.",
            ["limit"],
            registry=self.registry,
        )

    def observe(self, route: str, method: str, status: int, seconds: float, fields: dict) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        if fields.get("files"):
            self.files.labels(route).inc(fields["files"])
        if fields.get("bytes"):
            self.response_bytes.labels(route).inc(fields["bytes"])
        if fields.get("error_code"):
            self.errors.labels(fields["error_code"]).inc()


MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def exposition(metrics: Metrics) -> bytes:
    """The metrics in Prometheus' text format: this process's, or all workers' together."""
    if os.environ.get(MULTIPROCESS_VARIABLE):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(metrics.registry)


class MetricsEndpoint:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    async def metrics_endpoint(self, _request: Request) -> Response:
        return Response(exposition(self.metrics), headers={"Content-Type": CONTENT_TYPE_LATEST})
