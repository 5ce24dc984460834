"""The evaluator measures something: attention learns in-context recall in the CPU budget, an MLP-only model cannot.

Measured at search-1m widths, seeds 0-2 (docs/mad.md): AMAM 0.347-0.379, MMMM 0.122-0.144 (chance 0.125).
An MLP-only model sees one token at a time, so it can only guess among the values; the thresholds leave a margin
of about 0.07 on both sides. About 10 s on 2 CPU cores.
"""

from __future__ import annotations

from search.mad import BUDGETS, chance_accuracy, evaluate_pattern


def test_attention_learns_recall_and_mlp_only_stays_at_chance(mlp_only_recall):
    budget = BUDGETS["cpu"]
    recall = [task for task in budget.tasks if task.name == "in-context-recall"]
    assert recall, "the cpu budget scores in-context recall"
    attention = evaluate_pattern("AMAM", widths="search-1m", tasks=recall, budget=budget, seed=0)
    mlp_only = mlp_only_recall  # MMMM on the same task, trained once for the A, S and D tests (tests/conftest.py)
    chance = chance_accuracy(recall[0])
    assert chance == 0.125
    assert attention.score > 0.28, attention.accuracies
    assert mlp_only.score < 0.18, mlp_only.accuracies
    assert attention.score > 2 * chance > mlp_only.score
