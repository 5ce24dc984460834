"""Parallel layers (``[AS]`` ...): the branches read the same input side by side, each normalised and scaled."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from composer.presets import get_preset
from primitives.base import InitScheme
from primitives.registry import REGISTRY

TINY = get_preset("tiny").arch


def built(token: str):
    cls = REGISTRY.get(token)
    torch.manual_seed(0)
    layer = cls(cls.config_from_arch(TINY))
    layer.reset_parameters(InitScheme(n_layers=2))
    for scale in layer.scales:  # distinct per-channel scales, so a mixed-up branch/scale pairing shows
        scale.weight.data.uniform_(0.2, 1.5)
    return layer


@pytest.mark.parametrize("token", ["[AS]", "[SD]", "[WS]"])
def test_the_output_is_the_sum_of_each_branch_on_the_same_input_normed_apart(token):
    """``[AS](x) = rmsnorm(A(x)) * beta_A + rmsnorm(S(x)) * beta_S``, each branch computed on its own from ``x``.
    Branches chained one after the other (``S(A(x))``) or sharing one norm would give another sum."""
    layer = built(token)
    x = torch.randn(2, 12, TINY.d_model)
    expected = sum(
        F.rms_norm(branch(x.clone()), (TINY.d_model,), eps=scale.eps) * scale.weight
        for branch, scale in zip(layer.branches, layer.scales, strict=True)
    )
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)


def test_each_branch_sees_the_layer_input_not_another_branchs_output():
    layer = built("[AS]")
    seen = []
    for branch in layer.branches:
        branch.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    x = torch.randn(1, 8, TINY.d_model)
    layer(x)
    assert len(seen) == 2 and all(arg is x for arg in seen)
