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
