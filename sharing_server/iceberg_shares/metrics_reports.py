"""The body of the spec's `POST .../tables/{table}/metrics`: an engine's report of a scan or a commit.

A read-only catalog has no commits of its own, and keeps no reports: it reads the report's kind
for the audit line, and answers 400 in the Iceberg error model for a body that is no report.
"""

from __future__ import annotations

import json

from sharing_server.http.iceberg_errors import IcebergError

#: The spec's kinds; anything else is named in the audit line as `other`, never as sent.
REPORT_TYPES = ("scan-report", "commit-report")


def metrics_report_type(raw: bytes) -> str:
    """The report's `report-type`, from a body that must be a JSON object with one (400 if not)."""
    try:
        report = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise IcebergError(400, "a metrics report must be a JSON object") from None
    if not isinstance(report, dict) or not isinstance(report.get("report-type"), str):
        raise IcebergError(400, "a metrics report must be a JSON object with a string 'report-type'")
    kind = report["report-type"]
    return kind if kind in REPORT_TYPES else "other"
