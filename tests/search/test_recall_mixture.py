"""``search.recall_mixture``: one model trained on every length in turn, tested at each; deterministic, learning,
and a diverged run is a failed candidate with its reason."""

from __future__ import annotations

import pytest

from search.mad.evaluate import CandidateFailed
from search.recall import RecallBudget
from search.recall_mixture import _round_robin, train_on_mixture


def test_steps_take_the_lengths_in_turn_each_its_own_number_of_times():
    assert _round_robin([2, 2, 2]) == [0, 1, 2, 0, 1, 2]
    assert _round_robin([3, 1]) == [0, 1, 0, 0]
    assert _round_robin([0, 2]) == [1, 1]


def test_one_model_learns_every_length_and_the_same_seed_repeats_it():
    # 1 pair at 16 tokens and 2 at 32: answerable from the context's values alone, so a few hundred steps learn it
    budget = RecallBudget("t", lengths=(16, 32), kv_ratio=16, vocab_size=32, steps=150, tokens_per_step=256,
                          test_examples=64, lrs=(1e-2,))
    result = train_on_mixture("AA", budget, widths="tiny", seed=0)
    chance = 1 / 16
    assert set(result.accuracy_by_length) == {"16", "32"} and result.steps == 300
    assert result.accuracy_by_length["16"] > 4 * chance, result
    assert result.accuracy_by_length["32"] > 2 * chance, result
    again = train_on_mixture("AA", budget, widths="tiny", seed=0)
    assert again.accuracy_by_length == result.accuracy_by_length and again.train_loss == result.train_loss


def test_a_diverged_run_is_a_failed_candidate_naming_the_length():
    budget = RecallBudget("t", lengths=(16, 32), kv_ratio=16, vocab_size=32, steps=3, tokens_per_step=64,
                          test_examples=8, lrs=(float("inf"),))
    with pytest.raises(CandidateFailed, match=r"AS: recall mixture at lr inf: .* at step \d+ \(length (16|32)\)"):
        train_on_mixture("AS", budget, widths="tiny", seed=0)


def test_the_shift_stem_lets_one_attention_layer_look_a_key_up():
    # One attention layer cannot build the previous-token mark a lookup needs, so it stays on the plateau (about
    # 1 / pairs); handed each token's predecessor by the probe's stem it recalls every pair (docs/recall.md).
    budget = RecallBudget("t", lengths=(32,), kv_ratio=8, vocab_size=32, steps=300, tokens_per_step=512,
                          test_examples=64, lrs=(3e-3,), shift_stem=True)
    with_stem = train_on_mixture("A", budget, widths="tiny", seed=0).accuracy_by_length["32"]
    without = train_on_mixture("A", budget.replace(shift_stem=False), widths="tiny", seed=0).accuracy_by_length["32"]
    assert with_stem > 0.9 and without < 0.5, (with_stem, without)


def test_primitive_options_set_the_window_the_probe_trains():
    """The probe trains W at Samba's deployed window, not search-1m's 64 tokens: a window that covers the sequence
    recalls as attention does, one of 4 tokens cannot reach the pairs (the options reach the model)."""
    budget = RecallBudget("t", lengths=(32,), kv_ratio=8, vocab_size=32, steps=300, tokens_per_step=512,
                          test_examples=64, lrs=(3e-3,), shift_stem=True, primitive_options={"W": {"window": 64}})
    wide = train_on_mixture("W", budget, widths="tiny", seed=0).accuracy_by_length["32"]
    narrow = budget.replace(primitive_options={"W": {"window": 4}})
    short = train_on_mixture("W", narrow, widths="tiny", seed=0).accuracy_by_length["32"]
    assert wide > 0.9 and short < 0.5, (wide, short)
    from search.recall import get_recall_budget

    assert get_recall_budget("probe").primitive_options == {"W": {"window": 2048}}
    with pytest.raises(Exception, match="primitive_options maps a primitive"):
        RecallBudget("t", lengths=(32,), primitive_options={"W": 2048})
