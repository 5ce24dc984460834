"""Every training test runs in isolation: its own data cache (a run prepares the embedded corpus into
COMPOSER_CACHE, and two xdist workers must not share one) and W&B silent, with no key, so nothing can go online."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
