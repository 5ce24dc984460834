"""mad-lab's macro accuracy beside our plain accuracy: hand-computed cases, torchmetrics as mad-lab calls it, and
the evaluator reporting it without ranking by it."""

from __future__ import annotations

import pytest
import torch

from composer.errors import ConfigError
from search.mad import IGNORE_INDEX, Budget, TaskConfig, evaluate_pattern
from search.mad.evaluate import MAD_LAB_EVAL_BATCH, macro_accuracy, plain_accuracy

I = IGNORE_INDEX  # short, so the tables below line up

# Two sequences, imbalanced targets: class 0 six times, class 1 once; one position unscored. The model predicts
# 0 almost everywhere and once predicts class 3, which is never a target.
TARGETS = torch.tensor([[0, 0, 0, 0], [0, 0, 1, I]])
PREDICTIONS = torch.tensor([[0, 0, 0, 0], [0, 3, 0, 2]])


def test_plain_and_macro_differ_as_computed_by_hand():
    # plain: 5 of the 7 scored positions right.
    assert plain_accuracy(PREDICTIONS, TARGETS) == pytest.approx(5 / 7)
    # macro, one batch: recall of class 0 is 5/6, of class 1 0/1; class 3 was predicted but is never a target,
    # so torchmetrics counts it with recall 0; class 2 was predicted only at the unscored position, which drops
    # out, and classes 4..7 occur nowhere: neither counts. (5/6 + 0 + 0) / 3.
    assert macro_accuracy(PREDICTIONS, TARGETS, num_classes=8) == pytest.approx(5 / 18)


def test_macro_is_a_mean_over_batches_as_mad_lab_logs_it():
    # One sequence per batch: row 0 has class 0 only (recall 1); row 1 has class 0 (1/2), class 1 (0) and the
    # predicted class 3 (0): 1/6. mad-lab's epoch figure is their mean weighted by batch size: (1 + 1/6) / 2.
    assert macro_accuracy(PREDICTIONS, TARGETS, num_classes=8, batch_size=1) == pytest.approx(7 / 12)


def test_a_perfect_model_scores_one_both_ways_and_a_constant_one_scores_one_over_the_classes():
    targets = torch.tensor([[0, 0, 0, 1], [0, 0, 2, I]])
    assert macro_accuracy(targets.clamp(min=0), targets, num_classes=4) == pytest.approx(1.0)
    constant = torch.zeros_like(targets)
    assert plain_accuracy(constant, targets) == pytest.approx(5 / 7)
    assert macro_accuracy(constant, targets, num_classes=4) == pytest.approx(1 / 3)


def mad_lab_accuracy(logits: torch.Tensor, targets: torch.Tensor, vocab: int, batch_size: int) -> float:
    """What athms/mad-lab reports: its ``Accuracy`` (torchmetrics ``MulticlassAccuracy(num_classes=vocab,
    ignore_index=-100)`` on flattened argmax predictions) called on each test batch, the values averaged with the
    batch sizes as weights (Lightning's ``on_epoch`` mean)."""
    from torchmetrics.classification import MulticlassAccuracy

    metric = MulticlassAccuracy(num_classes=vocab, ignore_index=-100)
    values, sizes = [], []
    for start in range(0, len(targets), batch_size):
        batch_logits, batch_targets = logits[start : start + batch_size], targets[start : start + batch_size]
        flat = batch_logits.view(-1, batch_logits.size(-1)).argmax(-1)
        values.append(metric(flat, batch_targets.reshape(-1)).item())
        sizes.append(len(batch_targets))
    return sum(v * n for v, n in zip(values, sizes)) / sum(sizes)


@pytest.mark.parametrize("vocab, batch_size", [(10, MAD_LAB_EVAL_BATCH), (37, 64), (5, 1000)])
def test_macro_matches_torchmetrics_as_mad_lab_calls_it_on_random_logits(vocab, batch_size):
    generator = torch.Generator().manual_seed(vocab)
    logits = torch.randn(300, 12, vocab, generator=generator)
    targets = torch.randint(0, vocab, (300, 12), generator=generator)
    targets[torch.rand(300, 12, generator=generator) < 0.5] = 0  # imbalanced: class 0 is half the targets
    targets[torch.rand(300, 12, generator=generator) < 0.3] = IGNORE_INDEX
    logits[..., 0] += 1.5  # and the model leans to it: plain accuracy rewards that, macro accuracy does not
    ours = macro_accuracy(logits.argmax(-1), targets, vocab, batch_size)
    assert ours == pytest.approx(mad_lab_accuracy(logits, targets, vocab, batch_size), abs=1e-6)
    assert abs(ours - plain_accuracy(logits.argmax(-1), targets)) > 0.01


def test_bad_inputs_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="one \\[N, seq_len\\] shape"):
        macro_accuracy(PREDICTIONS[:1], TARGETS, num_classes=8)
    with pytest.raises(ConfigError, match="num_classes >= 2"):
        macro_accuracy(PREDICTIONS, TARGETS, num_classes=1)
    with pytest.raises(ConfigError, match="batch_size >= 1"):
        macro_accuracy(PREDICTIONS, TARGETS, num_classes=8, batch_size=0)


TINY_TASKS = (
    TaskConfig("in-context-recall", seq_len=16, num_train_examples=64, num_test_examples=16),
    TaskConfig("compression", seq_len=8, num_train_examples=64, num_test_examples=16),
)
TINY = Budget(name="test", tasks=TINY_TASKS, steps=3, batch_size=8)


def test_the_evaluator_reports_macro_beside_plain_and_scores_by_plain():
    result = evaluate_pattern("AM", widths="tiny", budget=TINY, seed=3)
    assert list(result.macro_accuracies) == list(result.accuracies)
    assert all(0.0 <= v <= 1.0 for v in result.macro_accuracies.values())
    assert result.macro_score == pytest.approx(sum(result.macro_accuracies.values()) / 2)
    assert result.score == pytest.approx(sum(result.accuracies.values()) / 2), "the score stays plain accuracy"
    assert result.details() == {"accuracy": result.accuracies, "macro_accuracy": result.macro_accuracies,
                                "macro_score": result.macro_score}
    record = result.to_dict()
    assert record["macro_score"] == result.macro_score and record["macro_accuracies"] == result.macro_accuracies
    assert [t["macro_accuracy"] for t in record["tasks"]] == [t.macro_accuracy for t in result.tasks]


def test_in_a_grid_the_cell_is_chosen_by_plain_accuracy_and_its_macro_is_reported():
    rates = (1e-3, 3e-3, 1e-2)
    grid = evaluate_pattern("AM", widths="tiny", budget=TINY.replace(lrs=rates), seed=0)
    cells = {lr: evaluate_pattern("AM", widths="tiny", budget=TINY.replace(lrs=(lr,)), seed=0) for lr in rates}
    for index, task in enumerate(grid.tasks):
        chosen = cells[task.lr].tasks[index]
        assert task.accuracy == chosen.accuracy == max(cell.tasks[index].accuracy for cell in cells.values())
        assert task.macro_accuracy == chosen.macro_accuracy, "the macro figure is the chosen cell's"
