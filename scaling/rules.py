"""Training rules by scale: token budgets and optimizer settings, each with its source.

Apply them at the *scale's reference model* (the Llama preset whose widths a composite has), not per candidate:
every model compared at one scale then trains on the same tokens with the same optimizer, as the paper's
comparisons require. The train recipes (``recipes/train/*.yaml``) hold the values these functions give for
their preset; ``tests/scaling/test_recipes.py`` keeps them in step.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from typing import Any

from composer.accounting import non_embedding_params
from composer.errors import ConfigError
from composer.presets import get_preset

TOKENS_PER_PARAM: dict[str, Fraction] = {
    # Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla), Table 3: the
    # compute-optimal budget is ~20 tokens per parameter (1B -> 20.2B tokens, 10B -> 205B). Chinchilla counts
    # all parameters, embeddings included (Pearce & Song 2024, "Reconciling Kaplan and Chinchilla").
    "chinchilla": Fraction(20),
    # The Composer paper's 1B runs (docs/method.md, "Scaling rules"): 37.5B DCLM tokens for Llama-3.2-1B's
    # 1,235,814,400 parameters, ~30.3 tokens per parameter. The paper's 350M and 3B budgets are not known to
    # us; this rule carries the 1B ratio to them.
    "paper": Fraction(37_500_000_000, 1_235_814_400),
}

SEQ_LEN = 8192  # docs/method.md, "Scaling rules": 8K context
# docs/method.md, "Scaling rules": "~2M-token global batch": 256 sequences of 8K = 2,097,152
GLOBAL_BATCH_TOKENS = 256 * SEQ_LEN

LR_ANCHOR_PRESETS: tuple[tuple[str, float], ...] = (
    # docs/method.md, "Scaling rules" (a sibling paper of the same group): peak LR by scale.
    ("llama-350m", 3e-3),
    ("llama-3.2-1b", 6e-4),
    ("llama-3.2-3b", 3e-4),
)


def lr_anchors() -> tuple[tuple[int, float], ...]:
    """``(non-embedding parameters, peak LR)`` of :data:`LR_ANCHOR_PRESETS`, sized from the presets."""
    return tuple((non_embedding_params(get_preset(name).arch), lr) for name, lr in LR_ANCHOR_PRESETS)


def _round_significant(x: Fraction | float, digits: int) -> int:
    if x <= 0:
        return 0
    scale = 10 ** (math.floor(math.log10(x)) - digits + 1)
    return round(Fraction(x) / scale) * scale if scale >= 1 else round(x)


def token_budget(params: int, rule: str | float = "chinchilla", digits: int = 3) -> int:
    """Training tokens for a model of ``params`` parameters (all of them, embeddings included).

    ``rule`` names a ratio of :data:`TOKENS_PER_PARAM` (``"chinchilla"``: 20, Hoffmann et al. 2022;
    ``"paper"``: the Composer paper's 37.5B at 1B) or is a number of tokens per parameter. The result is
    rounded to ``digits`` significant figures (``"paper"`` at Llama-3.2-1B gives exactly 37.5B).
    """
    if not isinstance(params, int) or isinstance(params, bool) or params <= 0:
        raise ConfigError(f"params must be a positive integer, got {params!r}")
    if isinstance(rule, str):
        try:
            ratio = TOKENS_PER_PARAM[rule]
        except KeyError:
            raise ConfigError(
                f"unknown token rule {rule!r}; choose {', '.join(TOKENS_PER_PARAM)} or give tokens per parameter"
            ) from None
    elif isinstance(rule, (int, float)) and not isinstance(rule, bool) and rule > 0:
        ratio = Fraction(rule)
    else:
        raise ConfigError(f"tokens per parameter must be positive, got {rule!r}")
    return _round_significant(ratio * params, digits)


def peak_lr(non_embedding_params: int, anchors: tuple[tuple[int, float], ...] | None = None) -> float:
    """Peak learning rate at a size: log-log linear interpolation between ``anchors`` (default: the
    anchors of docs/method.md, "Scaling rules").

    Power laws in size are the usual form of LR scaling fits (e.g. DeepSeek LLM, Bi et al. 2024), so between
    two anchors ``log lr`` is linear in ``log N``. Outside the anchors the nearest anchor's LR is kept rather
    than extrapolating the slope: the 350M->1B slope (-1.1) would give a 100M model 1e-2, and Llama 3.1 8B
    itself trained at 3e-4 (Llama 3 paper, Dubey et al. 2024), the 3B anchor's value.
    """
    anchors = sorted(lr_anchors() if anchors is None else anchors)
    if not anchors or any(n <= 0 or lr <= 0 for n, lr in anchors):
        raise ConfigError(f"LR anchors must be (size, lr) pairs of positive numbers, got {anchors!r}")
    if non_embedding_params <= 0:
        raise ConfigError(f"non_embedding_params must be positive, got {non_embedding_params!r}")
    sizes = [n for n, _ in anchors]
    i = bisect.bisect_left(sizes, non_embedding_params)
    if i < len(sizes) and sizes[i] == non_embedding_params:
        return anchors[i][1]
    if i == 0:
        return anchors[0][1]
    if i == len(sizes):
        return anchors[-1][1]
    (n0, lr0), (n1, lr1) = anchors[i - 1], anchors[i]
    w = math.log(non_embedding_params / n0) / math.log(n1 / n0)
    return math.exp(math.log(lr0) + w * math.log(lr1 / lr0))


def hyperparameters(
    non_embedding_params: int,
    *,
    anchors: tuple[tuple[int, float], ...] | None = None,
    seq_len: int = SEQ_LEN,
    global_batch_tokens: int = GLOBAL_BATCH_TOKENS,
    **overrides: Any,
) -> dict[str, Any]:
    """Optimizer and batch settings for a model of ``non_embedding_params`` (the scale's reference model).

    Keys other than ``global_batch_tokens`` and ``sources`` are :class:`composer.training.config.TrainConfig`
    fields, so the dict drops into a recipe. ``overrides`` replace any key. Sources per key in ``"sources"``.
    """
    if global_batch_tokens % seq_len:
        raise ConfigError(f"global_batch_tokens ({global_batch_tokens}) must be a multiple of seq_len ({seq_len})")
    settings: dict[str, Any] = {
        "lr": peak_lr(non_embedding_params, anchors),
        "seq_len": seq_len,
        "batch_size": global_batch_tokens // seq_len,
        "global_batch_tokens": global_batch_tokens,
        "schedule": "wsd",
        "warmup": 2000,
        "decay_fraction": 0.2,
        "min_lr_ratio": 0.1,
        "weight_decay": 0.1,
        "beta1": 0.9,
        "beta2": 0.95,
        "grad_clip": 1.0,
        "sources": {
            "lr": "docs/method.md, Scaling rules (peak LR 3e-3 at 350M, 6e-4 at 1B, 3e-4 at 3B); log-log "
            "interpolation between, the nearest anchor outside (this module)",
            "seq_len, batch": "docs/method.md, Scaling rules: 8K context, ~2M-token global batch",
            "schedule": "docs/method.md, Scaling rules: warmup-stable-decay (Hu et al. 2024, MiniCPM)",
            "decay_fraction": "Hägele et al. 2024 (Scaling Laws and Compute-Optimal Training Beyond Fixed "
            "Training Durations): a 20% cooldown matches cosine",
            "warmup, min_lr_ratio, optimizer": "Llama 2 (Touvron et al. 2023, section 2.2): 2000 warmup steps, "
            "decay to 10% of peak, AdamW beta (0.9, 0.95), weight decay 0.1, gradient clipping 1.0",
        },
    }
    unknown = set(overrides) - set(settings)
    if unknown:
        raise ConfigError(f"unknown hyperparameter override(s) {sorted(unknown)}; valid: {', '.join(settings)}")
    settings.update(overrides)
    return settings
