"""The supernet: placements of the kept attention layers, their patterns, the forward that runs the teacher's
attention where it is kept, and the beam search over placements (composer/hybridize/supernet.py)."""

from __future__ import annotations

import pytest
import torch

from composer.errors import ConfigError
from composer.hybridize.supernet import (
    beam_search,
    candidate_placements,
    check_supernet_pattern,
    placement_forward,
    placement_pattern,
    sample_placement,
    uniform_placement,
)
from tests.composer.hybridize.models import TEACHER, student_of, teacher_model


def test_placements_patterns_and_the_uniform_baseline():
    teacher = TEACHER.replace(pattern="AM" * 8)
    positions = check_supernet_pattern(teacher, "DM" * 8, keep=2)
    assert positions == [0, 2, 4, 6, 8, 10, 12, 14]
    assert placement_pattern("DM" * 8, teacher, (2, 10)) == "DMAM" + "DM" * 3 + "AM" + "DM" * 2
    assert uniform_placement(positions, 2) == (4, 12) and uniform_placement(positions, 1) == (8,)
    assert len(candidate_placements(positions, 2, 100)) == 28 and candidate_placements(positions, 4, 10) is None
    draws = {sample_placement(positions, 2, torch.Generator().manual_seed(s)) for s in range(50)}
    assert all(len(d) == 2 and set(d) <= set(positions) for d in draws) and len(draws) > 10
    with pytest.raises(ConfigError, match="layers 2 are still A"):
        check_supernet_pattern(teacher, "DMAM" + "DM" * 6, keep=1)
    with pytest.raises(ConfigError, match="--keep must be between 1 and 7"):
        check_supernet_pattern(teacher, "DM" * 8, keep=8)


def test_beam_search_finds_the_best_placement_of_an_additive_score():
    cost = {0: 5.0, 2: 1.0, 4: 3.0, 6: 0.5, 8: 4.0}
    ranked = beam_search(list(cost), 2, lambda placement: sum(cost[i] for i in placement), width=2)
    assert ranked[0][0] == (2, 6) and ranked[0][1] == 1.5
    assert all(len(p) == 2 for p, _ in ranked)


def test_a_placement_runs_the_teachers_attention_where_it_is_kept():
    teacher = teacher_model()
    student, _ = student_of("DMSMDM", teacher)
    ids = torch.randint(0, TEACHER.vocab_size, (2, 24))
    with torch.no_grad():
        everything = placement_forward(student, teacher, ids, (0, 2, 4))
        torch.testing.assert_close(everything, teacher(ids).logits)  # every attention kept: the teacher
        torch.testing.assert_close(placement_forward(student, teacher, ids, ()), student(ids).logits)


def test_copy_recall_is_one_for_a_model_that_copies_and_chance_for_one_that_does_not():
    from composer.hybridize.supernet import copy_recall

    batches = [torch.randint(0, 50, (4, 65)) for _ in range(2)]
    vocab = 64

    def oracle(ids):  # predicts the true next token: what a perfect copier does on the second copy
        nxt = torch.cat([ids[:, 1:], ids[:, :1]], dim=1)
        return torch.nn.functional.one_hot(nxt, vocab).float()

    assert copy_recall(oracle, batches, span=8) == 1.0
    assert copy_recall(lambda ids: torch.zeros(*ids.shape, vocab), batches, span=8) < 0.1
    with pytest.raises(ConfigError, match=r"longer than 2 \* span"):
        copy_recall(oracle, [torch.randint(0, 50, (2, 10))], span=8)
