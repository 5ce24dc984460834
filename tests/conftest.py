"""Shared test setup: every test starts from the same random state; under pytest-xdist (README's test command
runs two workers, one per CI core) each worker and the processes it starts use one thread, so two workers do
not fight over the cores with four."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch

# On another processor than the one its CPU constants were fitted on, the cost model warns once and validate
# refuses (composer.costmodel.processor). The suite's modeled CPU figures are the table's, whatever machine CI lands on
# (AMD EPYC or Intel Xeon so far): it takes this machine to be that processor, and so do the processes it starts.
# tests/composer/costmodel/test_processor.py checks the warning and the refusal with another stand-in.
os.environ.setdefault("COMPOSER_CPU_MODEL", json.loads(
    (Path(__file__).parents[1] / "composer" / "costmodel" / "constants.json").read_text())["devices"]["cpu"]["processor"])

if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _ctrl_c_as_python_sets_it():
    """Every test starts with Python's Ctrl-C handler, whatever the test before it on its worker left. A full run
    (2026-11-27) failed the Ctrl-C case of tests/search/test_lm.py with SIGINT not callable; Lightning sets SIGINT
    to SIG_IGN on a KeyboardInterrupt and to SIG_DFL after tearing a process group down, though neither happened
    through ``composer train`` when tried alone, so which test left it is not known."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(scope="session")
def mlp_only_recall():
    """MMMM on MAD's in-context recall (cpu budget, search-1m widths, seed 0): the floor below the A, S and D
    learning tests' hybrids (tests/search/mad/test_learning.py, tests/primitives/test_mamba2.py and
    test_gated_deltanet.py), trained once per worker instead of once per test. An MLP-only model sees one token at a
    time, so it can only guess among the values: chance, 0.122-0.144 over seeds 0-2 (docs/mad.md). One thread, as
    the D test trains: these small tensors gain nothing from two."""
    from search.mad import BUDGETS, evaluate_pattern

    budget = BUDGETS["cpu"]
    recall = [task for task in budget.tasks if task.name == "in-context-recall"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return evaluate_pattern("MMMM", widths="search-1m", tasks=recall, budget=budget, seed=0)
    finally:
        torch.set_num_threads(threads)
