"""The admin commands' temporary configuration: local storage, a SQLite store, under `tmp_path`."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "sharing.toml"
    path.write_text(f"""
[server]
host = "127.0.0.1"
port = 9999
public_url = "https://sharing.example.com"
data_dir = "{tmp_path / "data"}"

[storage]
type = "local"
root = "{tmp_path / "buckets"}"
""")
    return path
