"""Benchmarks are scripts, not modules of a package: the ``load_benchmark`` fixture imports one by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def load_benchmark(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/<name>.py` does: `from report import finish`

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)  # as an import does: a dataclass looks its module up there
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def fake(monkeypatch):
    """The lm evaluator's training replaced by the bookkeeping tests' deterministic fake (plumbing, not learning):
    the ``FakeTraining`` it records every run in."""
    from search.lm import LanguageModelEvaluator
    from tests.search.test_bookkeeping import FakeTraining

    training = FakeTraining()
    monkeypatch.setattr(LanguageModelEvaluator, "train_once",
                        lambda evaluator, pattern, lr, seed: training(evaluator, pattern, lr, seed))
    return training
