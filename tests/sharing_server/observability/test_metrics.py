"""The Prometheus metrics: what a request's observation counts, under which labels, and `/metrics`."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from sharing_server.observability.metrics import Metrics, MetricsEndpoint


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_request_is_counted_by_route_method_and_status_with_its_files_bytes_and_error() -> None:
    metrics = Metrics()
    metrics.observe("query", "POST", 200, 0.02, {"files": 3, "bytes": 500})
    metrics.observe("query", "POST", 404, 0.01, {"error_code": "RESOURCE_DOES_NOT_EXIST"})
    assert sample(metrics, "sharing_requests_total", route="query", method="POST", status="200") == 1
    assert sample(metrics, "sharing_requests_total", route="query", method="POST", status="404") == 1
    assert sample(metrics, "sharing_request_duration_seconds_count", route="query") == 2
    assert sample(metrics, "sharing_files_served_total", route="query") == 3
    assert sample(metrics, "sharing_response_bytes_total", route="query") == 500
    assert sample(metrics, "sharing_errors_total", code="RESOURCE_DOES_NOT_EXIST") == 1


def test_each_metrics_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.observe("list_shares", "GET", 200, 0.001, {})
    assert sample(second, "sharing_requests_total", route="list_shares", method="GET", status="200") == 0


def test_the_endpoint_serves_the_figures_in_prometheus_text_format() -> None:
    metrics = Metrics()
    metrics.observe("list_shares", "GET", 200, 0.001, {})
    app = Starlette(routes=[Route("/metrics", MetricsEndpoint(metrics).metrics_endpoint)])
    with TestClient(app) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert 'sharing_requests_total{method="GET",route="list_shares",status="200"} 1.0' in answer.text
