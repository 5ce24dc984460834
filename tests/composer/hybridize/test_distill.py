"""Distillation losses (composer/hybridize/distill.py)."""

from __future__ import annotations

import pytest
import torch

from composer.hybridize.distill import kl_divergence


def test_kl_divergence_is_zero_for_equal_logits_and_scaled_by_temperature_squared():
    logits = torch.randn(2, 5, 11)
    assert kl_divergence(logits, logits).item() == pytest.approx(0.0, abs=1e-6)
    other = torch.randn(2, 5, 11)
    expected = torch.nn.functional.kl_div(torch.log_softmax(other / 2, -1).reshape(-1, 11),
                                          torch.log_softmax(logits / 2, -1).reshape(-1, 11),
                                          log_target=True, reduction="batchmean") * 4
    assert kl_divergence(other, logits, 2.0).item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("kl_weight", [1.0, 0.25])
def test_the_distillation_step_trains_on_the_weighted_kl_to_the_teacher(kl_weight, monkeypatch):
    """The step's loss is ``kl_weight * KL(teacher || student) + (1 - kl_weight) * CE``, recomputed here from the
    two models' logits: a step that dropped the KL term (weight 0 in effect) gives the plain CE. (Training on CE alone
    also brings a mapped student closer to its teacher, so an end-to-end KL check cannot tell the two apart.)"""
    from composer.loss import cross_entropy
    from composer.model import build_model
    from composer.presets import get_preset
    from composer.training.module import ComposerLM, HybridizeConfig, OptimConfig

    torch.manual_seed(0)
    tiny = get_preset("tiny").arch
    module = ComposerLM(tiny.with_pattern("DMAM"), OptimConfig(), hybridize=HybridizeConfig(kl_weight=kl_weight))
    module.model = build_model(tiny.with_pattern("DMAM"))
    module.__dict__["_teacher"] = build_model(tiny.with_pattern("AMAM"))  # as configure_model keeps it: no submodule
    monkeypatch.setattr(module, "log", lambda *args, **kwargs: None)
    batch = torch.randint(0, tiny.vocab_size, (2, 17))
    loss = module._distillation_step(batch)
    with torch.no_grad():
        student = module.model(batch[:, :-1]).logits
        teacher = module.teacher(batch[:, :-1]).logits
    kl, ce = kl_divergence(student, teacher), cross_entropy(student, batch[:, 1:])
    assert kl.item() > 0.01  # two different models: a real KL to weigh
    assert loss.item() == pytest.approx((kl_weight * kl + (1 - kl_weight) * ce).item(), rel=1e-5)
