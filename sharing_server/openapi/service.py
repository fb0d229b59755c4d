"""The OpenAPI specs of the service's own endpoints: the liveness probe, metrics and the document."""

from __future__ import annotations

from sharing_server.openapi.components import NO_AUTH, errors
from sharing_server.openapi.shapes import TEXT, Area, json_content, operation, response


def area() -> Area:
    return Area(
        tags={"service": "Probes, metrics and this document."},
        operations={
            ("health", "GET"): operation(
                "health", "Liveness probe", "service", NO_AUTH, {"200": response("Up.", TEXT)}
            ),
            ("metrics_endpoint", "GET"): operation(
                "metrics",
                "Prometheus metrics",
                "service",
                NO_AUTH,
                {"200": response("Prometheus text exposition format.", TEXT)},
            ),
            ("openapi_endpoint", "GET"): operation(
                "openapi",
                "This document",
                "service",
                NO_AUTH,
                {"200": response("The OpenAPI document.", json_content({"type": "object"})), **errors(429)},
            ),
        },
    )
