"""``search.mad.models``: the task models, here the recall probe's token-shift stem."""

from __future__ import annotations

import pytest
import torch

from composer.model import ComposerModel
from search.mad.evaluate import resolve_widths
from search.mad.models import ShiftStemLM, build_task_model


def _arch(pattern: str = "AS"):
    return resolve_widths("tiny").with_pattern(pattern).replace(vocab_size=32, max_seq_len=64)


def test_the_stem_hands_each_position_its_predecessor_and_nothing_later():
    torch.manual_seed(0)
    model = build_task_model(_arch("M"), "lm-shift")  # an MLP alone mixes nothing: only the stem reaches back
    assert isinstance(model, ShiftStemLM)
    ids = torch.randint(0, 32, (1, 12))
    base = model(ids).logits
    earlier, later = ids.clone(), ids.clone()
    earlier[0, 4] = (ids[0, 4] + 1) % 32
    later[0, 6] = (ids[0, 6] + 1) % 32
    moved = (model(earlier).logits - base).abs().amax(-1)[0]
    assert moved[5] > 0 and moved[4] > 0  # the token itself and the one after it see the change
    assert torch.equal(moved[:4], torch.zeros(4)) and torch.equal(moved[6:], torch.zeros(6))  # two back: nothing
    assert torch.equal((model(later).logits - base).abs().amax(-1)[0, :6], torch.zeros(6))  # causal


def test_with_the_shift_at_zero_it_is_the_plain_model():
    torch.manual_seed(0)
    plain = ComposerModel(_arch())
    torch.manual_seed(0)
    stem = ShiftStemLM(_arch())
    with torch.no_grad():
        stem.shift.weight.zero_()
    ids = torch.randint(0, 32, (2, 16))
    assert torch.equal(stem(ids).logits, plain(ids).logits)
    assert any(p is stem.shift.weight for group in stem.parameter_groups(0.1) for p in group["params"])


def test_the_stem_model_has_no_cached_path_and_unknown_kinds_are_named():
    model = build_task_model(_arch(), "lm-shift")
    with pytest.raises(NotImplementedError, match="probe model"):
        model(torch.zeros(1, 4, dtype=torch.long), cache=model.init_cache(1, 8))
    with pytest.raises(ValueError, match="lm, autoencoder, lm-shift"):
        build_task_model(_arch(), "lm-twice")
