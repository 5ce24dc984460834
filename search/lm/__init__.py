"""The ``lm`` evaluator, in three rooms: its budgets (``budgets``: the table of named evaluations and the names
derived from them), the evaluator itself (``evaluator``: a candidate trained at the best of its budget's rates) and
the setting a stage's scores were measured under (``setting``). The names below are the package's interface."""

from search.lm.budgets import (
    LM_BUDGETS,
    BudgetName,
    LMBudget,
    confirm_budget,
    get_lm_budget,
    measured_seed_noise,
    unknown_budget_text,
)
from search.lm.evaluator import (
    TRUNK_SAVES,
    LanguageModelEvaluator,
    Run,
    as_run,
    checked_source,
    interrupted_message,
    quiet_lightning,
)
from search.lm.setting import stage_setting

__all__ = ["LM_BUDGETS", "BudgetName", "LMBudget", "LanguageModelEvaluator", "Run", "TRUNK_SAVES", "as_run",
           "checked_source", "confirm_budget", "get_lm_budget", "interrupted_message", "measured_seed_noise",
           "quiet_lightning", "stage_setting", "unknown_budget_text"]
