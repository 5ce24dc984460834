"""A cost measurement leaves the process as it found it (issue 69): it ran inside a search worker after
``torch.manual_seed(0)``, so every candidate trained after a measurement drew from a reset random state."""

from __future__ import annotations

import torch

from composer.evaluation.bench_cost import CostGrid, measure_cost, seeded
from composer.model import build_model
from composer.presets import get_preset

TINY = get_preset("tiny").arch.with_pattern("AM")
GRID = CostGrid(train_batch=1, seq_len=8, long_factor=1, large_batch=1, train_repeats=1, prefill_repeats=1,
                decode_repeats=1, min_repeat_seconds=0.0, short_decode=False)


def test_a_measurement_leaves_the_global_random_state_as_it_was():
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    measure_cost(TINY, GRID, "cpu")
    assert torch.equal(torch.rand(3), expected)


def test_a_measured_model_is_still_initialised_from_the_grid_seed():
    with seeded(GRID.seed, torch.device("cpu")):
        first = build_model(TINY).tok_embeddings.weight.clone()
    torch.rand(5)  # the process's state moves on; the measurement's does not
    with seeded(GRID.seed, torch.device("cpu")):
        second = build_model(TINY).tok_embeddings.weight
    assert torch.equal(first, second)
