"""The seeds' PySpark pipeline (examples/tpch_pipeline.py) end to end, at a tiny scale,
then the recipient's incremental job (examples/incremental_orders.py) on its share."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> Any:
    module_spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_pipeline_at_tiny_scale(spark, tmp_path: Path, capsys) -> None:
    summary = example("tpch_pipeline").run(spark, tmp_path, scale=0.001)
    assert summary["customers"] == 150 and summary["orders"] == 1500
    assert summary["result_rows"] > 0
    output = capsys.readouterr().out
    assert 'sharing-server share create test tpch "orders:delta:testdelta:tpch/orders"' in output
    assert '"tpch:customer:uniform:testice:tpch:customer"' in output
    assert "OK: Spark and pandas over the share equal the source query" in output

    incremental = example("incremental_orders").run(spark, tmp_path, commits=2, size=7)
    # The first run copies the snapshot; the next only the provider's two new commits.
    assert incremental == {"first_run": 1500, "orders": 1514, "new": 14}
    output = capsys.readouterr().out
    assert (
        "provider: committed orders 1501..1507" in output
        and "provider: committed orders 1508..1514" in output
    )
    assert "OK: the recipient's table equals the shared table (1514 orders, none twice)" in output
