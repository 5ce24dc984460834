"""A synthetic cost table with round constants, so a test can check the model's arithmetic exactly and does not
move when ``benchmarks/cost_model.py fit`` rewrites the real one."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from composer.costmodel import parse_table

KEYS = ("A", "M", "S", "D", "W", "E", "head")
PEAK, BANDWIDTH, OP_COST = 1e11, 1e10, 1e-5


def synthetic_raw(efficiency: float = 0.5, ops: int = 10, per_chunk: int = 0) -> dict:
    """Every efficiency ``efficiency``; every unit ``ops`` ops (``+ per_chunk`` per chunk beyond the second)."""
    source = {"value": 0, "source": "test"}

    def const(value):
        return {**source, "value": value}

    counts = [ops, ops + per_chunk, ops + 3 * per_chunk]
    phases = ("train", "prefill", "decode")
    return {
        "sources": {"test": {"kind": "assumed", "note": "tests/composer/costmodel/conftest.py"}},
        "counts": {"source": "test", "per_key": {
            key: {p: {"ops": counts, "kernels": counts} for p in (*phases, "optimizer")} for key in KEYS}},
        "devices": {
            "box": {"description": "a test device", "precision": "fp32", "threads": 1, "overhead_unit": "ops",
                    "train_shape": [4, 64], "peak_flops": const(PEAK), "bandwidth": const(BANDWIDTH),
                    "op_cost_s": {p: const(OP_COST) for p in (*phases, "optimizer")},
                    "efficiency": {p: {k: const(efficiency) for k in (*KEYS, "optimizer", "embedding")}
                                   for p in phases}},
        },
    }


@pytest.fixture
def raw_table() -> dict:
    return copy.deepcopy(synthetic_raw())


@pytest.fixture
def box():
    """The synthetic device's figures and a maker of variants (``box.table(per_chunk=5)``)."""
    return SimpleNamespace(peak=PEAK, bandwidth=BANDWIDTH, op_cost=OP_COST,
                           table=lambda **kw: parse_table(synthetic_raw(**kw)))


@pytest.fixture
def table(raw_table):
    return parse_table(raw_table)
