"""Evaluators: the proxy that scores a candidate pattern after small-scale training.

* ``mad`` (default, the paper's winning proxy): mean test accuracy over MAD synthetic tasks, trained at the
  search widths (``search.mad``). Higher is better.
* ``lm``: validation loss after a fixed token budget on a text source, through the training engine. Lower is
  better.
* ``recall``: mean accuracy of Zoology's multi-query associative recall over sequence lengths up to 1,024 (more
  on GPU), with the key-value pairs growing with the length (``search.recall``). Higher is better.

An evaluator is called with the pattern, a seed and a ``report(step, value)`` callback for intermediate values
(used for pruning); it returns an :class:`Evaluation` or raises ``CandidateFailed`` with a reason.

Both built-in evaluators take ``precision`` (``auto``: bf16 where the device computes it natively, see
:mod:`composer.precision`; ``fp32``; ``bf16``) and ``compile`` (``torch.compile`` each candidate).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from composer.errors import ConfigError

Report = Callable[[int, float], None]


@dataclass(frozen=True)
class Evaluation:
    score: float
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


class Evaluator(Protocol):
    name: str
    direction: str  # "maximize" or "minimize"
    budget: str

    def __call__(self, pattern: str, seed: int, report: Report) -> Evaluation: ...


class MadEvaluator:
    """Mean test accuracy over the budget's MAD tasks at the search widths."""

    name = "mad"
    direction = "maximize"

    def __init__(self, budget: str = "cpu", widths: str = "search-1m", precision: str = "auto",
                 compile: bool = False) -> None:
        import torch

        from search.mad import BUDGETS, resolve_precision

        if budget not in BUDGETS:
            raise ConfigError(f"unknown MAD budget {budget!r}; choose one of: {', '.join(BUDGETS)}")
        self.budget = budget
        self.widths = widths
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.precision = resolve_precision(BUDGETS[budget].precision if precision == "auto" else precision, device)
        self.compile = compile

    def __call__(self, pattern: str, seed: int, report: Report) -> Evaluation:
        from search.mad import BUDGETS, evaluate_pattern

        budget = BUDGETS[self.budget]
        result = evaluate_pattern(pattern, widths=self.widths, tasks=budget.tasks, budget=budget, seed=seed,
                                  report=report, precision=self.precision, compile=self.compile)
        return Evaluation(score=result.score, details={"accuracy": dict(result.accuracies)}, seconds=result.seconds)


_TRAIN_PRECISION = {"auto": "auto", "fp32": "32-true", "bf16": "bf16-mixed"}  # evaluator name -> Lightning's
LM_BUDGETS = {
    # name: (training tokens, sequence length, global batch)
    "smoke": (40_000, 128, 8),
    "cpu": (400_000, 128, 16),
    "gpu": (50_000_000, 1024, 64),
}


class LanguageModelEvaluator:
    """Validation loss of the pattern after ``tokens`` training tokens on ``data`` (the training engine)."""

    name = "lm"
    direction = "minimize"

    def __init__(self, budget: str = "cpu", widths: str = "search-1m", data: str | None = None,
                 tokenizer: str | None = None, precision: str = "auto", compile: bool = False) -> None:
        from composer.training import TrainConfig
        from composer.training.run import resolve_precision

        if budget not in LM_BUDGETS:
            raise ConfigError(f"unknown LM budget {budget!r}; choose one of: {', '.join(LM_BUDGETS)}")
        if precision not in _TRAIN_PRECISION:
            raise ConfigError(f"precision must be one of {', '.join(_TRAIN_PRECISION)}, got {precision!r}")
        self.budget = budget
        self.widths = widths
        self.data = data
        self.tokenizer = tokenizer
        resolved = resolve_precision(TrainConfig(precision=_TRAIN_PRECISION[precision]))
        self.precision = "bf16" if resolved.startswith("bf16") else "fp32"
        self.compile = compile

    def __call__(self, pattern: str, seed: int, report: Report) -> Evaluation:
        import math

        from composer.training import TrainConfig, train

        tokens, seq_len, batch = LM_BUDGETS[self.budget]
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="composer-lm-eval-") as out:
            summary = train(
                TrainConfig(
                    arch=pattern, preset=self.widths, data=self.data, tokenizer=self.tokenizer, tokens=tokens,
                    seq_len=seq_len, batch_size=batch, seed=seed, wandb="off", out=out, val_batches=20,
                    checkpoint_interval=10**9, keep_checkpoints=1, precision=_TRAIN_PRECISION[self.precision],
                    compile=self.compile,
                )
            )
        loss = summary["val_loss"]
        if loss is None or not math.isfinite(loss):
            from search.mad import CandidateFailed

            raise CandidateFailed(f"validation loss is {loss}")
        return Evaluation(
            score=loss,
            details={"val_ppl": summary["val_ppl"], "tokens_per_s": summary["tokens_per_s"]},
            seconds=time.perf_counter() - started,
        )


def make_evaluator(name: str, budget: str, widths: str, data: str | None = None,
                   tokenizer: str | None = None, precision: str = "auto", compile: bool = False) -> Evaluator:
    """``mad``, ``lm``, ``recall``, or your own as ``module:factory`` (called with budget=, widths=, data=, tokenizer=, and
    precision= / compile= when its signature takes them)."""
    if name == "mad":
        return MadEvaluator(budget, widths, precision, compile)
    if name == "lm":
        return LanguageModelEvaluator(budget, widths, data, tokenizer, precision, compile)
    if name == "recall":
        from search.recall import RecallEvaluator

        return RecallEvaluator(budget, widths, precision, compile)
    if ":" in name:
        import importlib

        module_name, _, attribute = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"cannot load evaluator {name!r}: {err}") from err
        if not callable(factory):
            raise ConfigError(f"evaluator {name!r} is not a factory (a callable returning an evaluator)")
        options = {"budget": budget, "widths": widths, "data": data, "tokenizer": tokenizer}
        options.update(_accepted(factory, precision=precision, compile=compile))
        try:
            evaluator = factory(**options)
        except TypeError as err:
            raise ConfigError(f"evaluator factory {name!r} cannot be called as factory(budget=, widths=, data=, "
                              f"tokenizer=): {err}") from err
        return _checked(evaluator, name)
    raise ConfigError(f"unknown evaluator {name!r}; choose 'mad', 'lm', 'recall' or a 'module:factory' of your own")


def _accepted(factory: Callable[..., Any], **options: Any) -> dict[str, Any]:
    """The ``options`` that ``factory`` takes by name (factories written before an option existed keep working)."""
    import inspect

    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return options
    return {key: value for key, value in options.items() if key in parameters}


def _checked(evaluator: Any, name: str) -> Evaluator:
    """Refuse, before any trial runs, a factory result that is not an evaluator (see :class:`Evaluator`)."""
    missing = [attribute for attribute in ("name", "direction", "budget") if not hasattr(evaluator, attribute)]
    if not callable(evaluator) or missing:
        what = "not callable" if not callable(evaluator) else f"lacks {', '.join(missing)}"
        raise ConfigError(f"evaluator factory {name!r} returned {type(evaluator).__name__} ({what}), not an "
                          "evaluator: a callable(pattern, seed, report) with name, direction and budget")
    if evaluator.direction not in ("maximize", "minimize"):
        raise ConfigError(f"evaluator {name!r} has direction {evaluator.direction!r}; use 'maximize' or 'minimize'")
    return evaluator
