"""A maintenance run during an outage (the store's database or storage unreachable) fails each kind
with one line saying so: no traceback in the log, which a CLI run would print before its result."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance.configuration import KINDS
from share_store.catalog.maintenance.maintainer import Maintainer
from tests.share_store.catalog.maintenance.test_background import T, appended


def test_a_kind_failing_on_an_outage_says_so_in_one_line(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    appended(catalog, 1)
    maintainer = Maintainer(catalog)

    def unreachable(*_args: Any) -> dict[str, Any]:
        raise OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(maintainer, "_run_kind", unreachable)
    with caplog.at_level(logging.INFO):
        runs = maintainer.run(T)
    assert set(runs) == set(KINDS)
    for run in runs.values():
        assert run.status == "Failed"
        assert run.message is not None and "unreachable" in run.message and "try again" in run.message
    assert caplog.records and not [r for r in caplog.records if r.exc_info], "no traceback for an outage"
    assert all("closed the connection" not in r.getMessage() for r in caplog.records)


def test_a_bug_still_logs_its_traceback(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    appended(catalog, 1)
    maintainer = Maintainer(catalog)

    def bug(*_args: Any) -> dict[str, Any]:
        raise KeyError("a bug")

    monkeypatch.setattr(maintainer, "_run_kind", bug)
    runs = maintainer.run(T)
    assert all(run.message == "KeyError (see the server's log)" for run in runs.values())
    assert [r for r in caplog.records if r.exc_info]
