"""A preset's widths scaled to another ``d_model``: how a pattern reaches a target's size at a chosen depth.

Why: growth by depth (``scaling.extrapolate``) keeps the target's widths and adds layers, so at equal parameters a
thin pattern (no MLP, small mixers) becomes a deep model: ``SADDDD`` at ``demo-4m`` has 34 layers against Llama's
16. A deeper, thinner model has a lower loss at small scale whatever its mixers are (MobileLLM, arXiv 2402.14905)
and pays for it in latency. To tell depth from the mixers, a pattern must also grow at a *chosen* depth, by width.

The width rule (one factor ``w = d_model / d_model_target``, everything that is a width scaled with it):

* ``d_model``: a multiple of :func:`width_quantum` (64 at GPU widths, where GEMM tiles and memory alignment want
  it; 8 below 512, the tensor cores' least step, where 64 would move a small model's size by a third at once);
* attention: ``head_dim`` kept (the kernels' tile), ``n_kv_heads = max(1, round(w * n_kv_heads))`` and
  ``n_heads = group * n_kv_heads``, the target's query group kept, so attention's width follows ``w`` in whole
  key/value groups (its output projection maps ``n_heads * head_dim`` back to ``d_model``, which need not match);
* the MLP's ``ffn_dim``: ``w * ffn_dim`` rounded to the quantum;
* the other mixers derive their widths from these (Mamba-2: ``expand * d_model``; Gated DeltaNet: heads sized to
  attention's projections), so they follow.

A scaled preset is named ``NAME:dD`` (``demo-4m:d256``): every command that takes a preset takes it
(:func:`composer.presets.get_preset`), so a model grown at a depth trains, is costed and is searched like any other.
"""

from __future__ import annotations

import dataclasses
import re

from composer.config import ArchConfig
from composer.errors import ConfigError

SCALED_NAME = re.compile(r"(?P<base>[^:]+):d(?P<d_model>\d+)")
"""``NAME:dD``: preset ``NAME``'s widths scaled to ``d_model = D``."""


def width_quantum(arch: ArchConfig) -> int:
    """The step ``d_model`` moves in at ``arch``'s scale (module docstring)."""
    return 64 if arch.d_model >= 512 else 8


def scale_widths(arch: ArchConfig, d_model: int) -> ArchConfig:
    """``arch`` with every width scaled to ``d_model`` (the module docstring's rule); pattern and options kept."""
    quantum = width_quantum(arch)
    if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < quantum or d_model % quantum:
        raise ConfigError(
            f"d_model {d_model!r} must be a positive multiple of {quantum} at these widths "
            f"(a multiple of the {quantum} the kernels step in)"
        )
    if d_model == arch.d_model:
        return arch
    factor = d_model / arch.d_model
    group = max(1, arch.n_heads // arch.n_kv_heads)
    n_kv_heads = max(1, round(factor * arch.n_kv_heads))
    ffn_dim = max(quantum, round(factor * arch.ffn_dim / quantum) * quantum)
    return dataclasses.replace(
        arch, d_model=d_model, n_heads=group * n_kv_heads, n_kv_heads=n_kv_heads, ffn_dim=ffn_dim
    )


def widths_table(arch: ArchConfig) -> dict[str, int]:
    """The widths a grown model is built at, as ``composer info`` and ``extrapolate`` print them."""
    return {
        "d_model": arch.d_model,
        "n_heads": arch.n_heads,
        "n_kv_heads": arch.n_kv_heads,
        "head_dim": arch.head_dim,
        "ffn_dim": arch.ffn_dim,
    }
