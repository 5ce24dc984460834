"""A pattern's starting learning rate from its search (issue 25): the rate its search trial chose.

Why: the search's ``lm`` and ``recall`` evaluators train each candidate at a small grid of rates and keep the best
(``search.aggregate.Scored.lr``). Training the same pattern at the target with one shared default throws that
knowledge away and, as issue 16 showed, partly measures which architecture tolerates the default. So, unless the
user decided otherwise, ``composer transfer`` and ``composer pipeline`` start each model at the rate the search
found for it. The precedence, from strongest to weakest:

1. ``train.lr_sweep`` (``--lr-sweep``): every model trains at its swept rate (``composer.experiments.lr_sweep``); the search's
   rate is only recorded (``search_lr``). Source ``"sweep"``.
2. an explicit ``train.lr`` (``--lr``, or ``lr:`` in the recipe's train section): every model shares it.
   Source ``"shared"``.
3. the search's rate for the model's searched pattern, when the search recorded one. Source ``"search"``.
4. otherwise the shared default rate. Source ``"shared"``.

A search rate was chosen at the search's widths, depth and budget: a starting point for the target, not a rate
tuned there, and every report that uses one says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from composer.experiments.lr_sweep import sweep_notes

SEARCH, SWEEP, SHARED = "search", "sweep", "shared"


@dataclass(frozen=True)
class SearchRate:
    """A rate the search chose, and the searched pattern it was chosen for (a composite or baseline's stand-in)."""

    lr: float
    pattern: str


@dataclass(frozen=True)
class StartingRate:
    """The rate a model trains at and where it came from (``"search"``, ``"sweep"`` or ``"shared"``)."""

    lr: float
    source: str
    search: SearchRate | None = None  # what the search recorded for the model, whether used or not

    def to_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "lr_source": self.source,
                "search_lr": None if self.search is None else self.search.lr,
                "search_lr_pattern": None if self.search is None else self.search.pattern}


def search_rates(scored: Iterable[Any]) -> dict[str, float]:
    """Pattern -> its chosen rate, for the scored patterns (``search.aggregate.Scored``) that carry one."""
    return {s.pattern: s.lr for s in scored if getattr(s, "lr", None) is not None}


def lookup(rates: Mapping[str, float], *patterns: str | None) -> SearchRate | None:
    """The rate of the first of ``patterns`` (in order of preference) that the search scored with a rate."""
    for pattern in patterns:
        if pattern is not None and pattern in rates:
            return SearchRate(float(rates[pattern]), pattern)
    return None


def starting_rates(found: Mapping[str, SearchRate | None], shared_lr: float, *, explicit_lr: bool = False,
                   sweep: Mapping[str, Any] | None = None) -> dict[str, StartingRate]:
    """Each model's rate (``found`` names every model, with its search rate or None) by the module's precedence."""
    rates = {}
    for name, search in found.items():
        if sweep is not None:
            rates[name] = StartingRate(sweep["models"][name]["chosen_lr"], SWEEP, search)
        elif search is not None and not explicit_lr:
            rates[name] = StartingRate(search.lr, SEARCH, search)
        else:
            rates[name] = StartingRate(shared_lr, SHARED, search)
    return rates


def per_model(rates: Mapping[str, StartingRate]) -> dict[str, dict[str, float]]:
    """``plan_replicates``' ``per_model``: each model's own TrainConfig settings (its rate)."""
    return {name: {"lr": rate.lr} for name, rate in rates.items()}


def rate_notes(rates: Mapping[str, StartingRate], shared_lr: float, sweep: Mapping[str, Any] | None = None,
               explicit_lr: bool = False) -> list[str]:
    """What a report's reader must know about where its learning rates came from."""
    recorded = [name for name, rate in rates.items() if rate.search is not None]
    if sweep is not None:
        notes = sweep_notes(sweep, shared_lr)
        if recorded:
            notes.append("the search's own rates are recorded beside the swept ones (search_lr); the sweep decides")
        return notes
    used = [name for name, rate in rates.items() if rate.source == SEARCH]
    if not used:
        notes = sweep_notes(None, shared_lr)
        if explicit_lr and recorded:
            notes.append(f"train.lr ({shared_lr:g}) was given, so it overrides the rates the search chose "
                         "(recorded as search_lr)")
        return notes
    others = [name for name in rates if name not in used]
    notes = [f"learning rate from the search for {', '.join(used)}: each trains at the rate its search trial chose "
             "(lr_source search; search_lr_pattern names the searched pattern)"
             + (f"; {', '.join(others)} at the shared {shared_lr:g}, the search having no rate for "
                "its pattern" if others else "")]
    notes.append("the search chose its rates at its own widths, depth and budget: a starting point, not a rate "
                 "tuned at the target; tune it with train.lr_sweep (or --lr-sweep)")
    return notes


__all__ = ["SEARCH", "SHARED", "SWEEP", "SearchRate", "StartingRate", "lookup", "per_model", "rate_notes",
           "search_rates", "starting_rates"]
