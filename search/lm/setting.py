"""The setting a search stage's scores were measured under (``search.evidence_record.Setting``): what two scores
must share before their difference is taken."""

from __future__ import annotations

from typing import Any

from search.evidence_record import Setting
from search.lm.budgets import BudgetName, get_lm_budget


def stage_setting(config: Any) -> Setting:
    """The setting a stage's scores come from (``config``: its ``search.config.SearchConfig``): its budget without a
    confirmation's prefix or the target suffix (a confirmation of ``rung-cpu-2@demo-4m`` and the rung share
    ``rung-cpu-2``), the preset it trained at, the corpus and the tokenizer, and the precision and device it
    computed in (``search.evidence_record``)."""
    import torch

    budget = BudgetName.parse(config.budget) if config.evaluator == "lm" else None
    name, at = (budget.base, budget.at) if budget else (str(config.budget), None)
    if config.evaluator != "lm":
        return Setting(config.evaluator, name, at or config.widths)
    return Setting("lm", name, at or get_lm_budget(name).extrapolate_to or config.widths, config.data,
                   config.tokenizer, precision=config.resolved_precision,
                   device="cuda" if torch.cuda.is_available() else "cpu")
