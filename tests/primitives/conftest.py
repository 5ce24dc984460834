"""Shared references for the primitive tests."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import pytest
import torch

from primitives.attention import GroupedQueryAttention
from primitives.rope import apply_rotary, rotary_cos_sin


def naive_attention_reference(module: GroupedQueryAttention, x: torch.Tensor) -> torch.Tensor:
    """Masked softmax over explicit scores with the module's weights: causal, and for a module with a ``window``
    (sliding-window attention) keys ``i - window < j <= i`` only."""
    c = module.config
    b, s, _ = x.shape
    q, k, v = module.wqkv(x).view(b, s, -1, c.head_dim).split((c.n_heads, c.n_kv_heads, c.n_kv_heads), 2)
    cos, sin = rotary_cos_sin(module.inv_freq, s, x.dtype)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    group = c.n_heads // c.n_kv_heads
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(c.head_dim)
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    allowed = j <= i
    window = getattr(c, "window", None)
    if window is not None:
        allowed &= j > i - window
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return module.wo(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, -1))


@pytest.fixture
def naive_attention():
    """The reference above, as a fixture so that test modules (imported with importlib) share one copy."""
    return naive_attention_reference


def float64_parity(module: torch.nn.Module, run_reference: Callable, x: torch.Tensor, values_tol: float = 1e-4,
                   grads_tol: float = 1e-3) -> None:
    """``module`` (float32) on ``x`` against ``run_reference(copy, x)``, a reference computation in float64 on a
    float64 copy of ``module`` (same weights): the output within ``values_tol``, and, for one random output
    gradient, the gradients of the input and of every parameter within ``grads_tol`` (relative and absolute)."""
    reference = copy.deepcopy(module).double()
    x = x.detach().requires_grad_()
    x_ref = x.detach().double().requires_grad_()
    y, y_ref = module(x), run_reference(reference, x_ref)
    torch.testing.assert_close(y, y_ref.float(), rtol=values_tol, atol=values_tol)
    grad = torch.randn_like(y)
    names = ["input", *(name for name, _ in module.named_parameters())]
    grads = torch.autograd.grad(y, [x, *module.parameters()], grad)
    grads_ref = torch.autograd.grad(y_ref, [x_ref, *reference.parameters()], grad.double())
    for name, g, g_ref in zip(names, grads, grads_ref, strict=True):
        torch.testing.assert_close(g, g_ref.float(), rtol=grads_tol, atol=grads_tol,
                                   msg=lambda message, name=name: f"{name}: {message}")


@pytest.fixture
def parity_in_float64():
    """:func:`float64_parity`, as a fixture so that test modules (imported with importlib) share one copy."""
    return float64_parity
