"""Shared test setup: every test starts from the same random state; under pytest-xdist (README's test command
runs two workers, one per CI core) each worker and the processes it starts use one thread, so two workers do
not fight over the cores with four."""

from __future__ import annotations

import os

import pytest
import torch

if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield
