"""The seeds' PySpark pipeline (examples/tpch_pipeline.py) end to end, at a tiny scale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tpch_pipeline.py"


def test_pipeline_at_tiny_scale(spark, tmp_path: Path, capsys) -> None:
    module_spec = importlib.util.spec_from_file_location("tpch_pipeline", EXAMPLE)
    pipeline = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(pipeline)
    summary = pipeline.run(spark, tmp_path, scale=0.001)
    assert summary["customers"] == 150 and summary["orders"] == 1500
    assert summary["result_rows"] > 0
    output = capsys.readouterr().out
    assert 'sharing-server share create test tpch "orders:delta:testdelta:tpch/orders"' in output
    assert '"tpch:customer:uniform:testice:tpch:customer"' in output
    assert "OK: Spark and pandas over the share equal the source query" in output
