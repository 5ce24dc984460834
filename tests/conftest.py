"""Shared test setup: every test starts from the same random state."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield
