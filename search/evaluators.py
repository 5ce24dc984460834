"""Evaluators: the proxy that scores a candidate pattern after small-scale training.

Three are built in (``--evaluator``):

* ``lm`` (default): validation loss after a fixed token budget on a text source, through the training engine, at
  the best of a small grid of learning rates per candidate (``search.lm``). Lower is better. The default because
  it ranked the target where MAD did not (README, "Why ``lm`` is the default evaluator").
* ``mad`` (the paper's proxy): mean test accuracy over MAD synthetic tasks, trained at the search widths
  (``search.mad``). Higher is better.
* ``recall``: mean accuracy of Zoology's multi-query associative recall over sequence lengths up to 1,024 (more
  on GPU), with the key-value pairs growing with the length (``search.recall``). Higher is better.

An evaluator is called with the pattern, a seed and a ``report(step, value)`` callback for intermediate values
(used for pruning); it returns an :class:`Evaluation` or raises ``CandidateFailed`` with a reason.

All three take ``precision`` (``auto``: bf16 where the device computes it natively, see
:mod:`composer.precision`; ``fp32``; ``bf16``) and ``compile`` (``torch.compile`` each candidate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from composer.errors import ConfigError, moved_module_error
from search.evaluation import Evaluation, Evaluator, Report
from search.lm import LM_BUDGETS, LanguageModelEvaluator  # re-exported: their home is search.lm


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
        return Evaluation(score=result.score, details=result.details(), seconds=result.seconds)



__all__ = ["LM_BUDGETS", "Evaluation", "Evaluator", "LanguageModelEvaluator", "MadEvaluator", "Report",
           "make_evaluator"]


def make_evaluator(name: str, budget: str, widths: str, data: str | None = None,
                   tokenizer: str | None = None, precision: str = "auto", compile: bool = False,
                   trunks: str | None = None, known: dict[str, str] | None = None,
                   chosen_rates: dict[str, float] | None = None, growth=None,
                   text_field: str = "text") -> Evaluator:
    """``mad``, ``lm``, ``recall``, or your own as ``module:factory`` (called with budget=, widths=, data=, tokenizer=,
    and precision= / compile= / text_field= when its signature takes them). ``trunks``: where ``lm`` keeps the trunks
    that a later rung continues (a search's ``--out/trunks``; ``search.trunks``). ``known``: the stage's known layouts
    (searched pattern -> family name), which ``lm`` trains in their own layout at the target's size
    (``search.growth.grow``). ``chosen_rates``: searched pattern -> the rate a confirmation trains it at (``lm``).
    ``growth``: the search's ``search.growth.Growth``, the rule ``lm`` grows every pattern to a budget's target by
    (its attention rule, depth and equal cost). ``text_field``: the column of ``data``'s records that holds the
    text (``lm``, and a factory that takes it)."""
    if name == "mad":
        return MadEvaluator(budget, widths, precision, compile)
    if name == "lm":
        return LanguageModelEvaluator(budget, widths, data, tokenizer, precision, compile, trunks=trunks, known=known,
                                      chosen_rates=chosen_rates, growth=growth, text_field=text_field)
    if name == "recall":
        from search.recall import RecallEvaluator

        return RecallEvaluator(budget, widths, precision, compile)
    if ":" in name:
        import importlib

        module_name, _, attribute = name.partition(":")
        moved = moved_module_error(module_name, attribute)
        if moved is not None:
            raise ConfigError(f"cannot load evaluator {name!r}: {moved}")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"cannot load evaluator {name!r}: {err}") from err
        if not callable(factory):
            raise ConfigError(f"evaluator {name!r} is not a factory (a callable returning an evaluator)")
        options = {"budget": budget, "widths": widths, "data": data, "tokenizer": tokenizer}
        options.update(_accepted(factory, precision=precision, compile=compile, text_field=text_field))
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
