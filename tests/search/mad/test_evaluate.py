"""The MAD evaluator: training plumbing, failures, reporting, determinism (fast, at tiny widths)."""

from __future__ import annotations

import math

import pytest
import torch

from composer import get_preset
from composer.errors import ConfigError, PatternError
from search.mad import (
    BUDGETS,
    Budget,
    CandidateFailed,
    CompressionAutoEncoder,
    MadResult,
    TaskConfig,
    evaluate_pattern,
    get_budget,
)
from search.mad.models import round_up

TINY_TASKS = (
    TaskConfig("in-context-recall", seq_len=16, num_train_examples=64, num_test_examples=16),
    TaskConfig(
        "selective-copying", seq_len=24, num_tokens_to_copy=4, num_train_examples=64, num_test_examples=16
    ),
    TaskConfig("compression", seq_len=8, num_train_examples=64, num_test_examples=16),
)
TINY = Budget(name="test", tasks=TINY_TASKS, steps=3, batch_size=8)


def test_named_budgets_exist_and_are_valid():
    assert {"smoke", "cpu", "gpu", "paper"} <= set(BUDGETS)
    for budget in BUDGETS.values():
        assert budget.tasks and budget.description
        assert all(budget.steps_for(task) >= 1 for task in budget.tasks)
    assert get_budget("cpu") is BUDGETS["cpu"]
    paper = BUDGETS["paper"]
    assert {t.name for t in paper.tasks} == {
        "in-context-recall",
        "fuzzy-in-context-recall",
        "noisy-in-context-recall",
        "selective-copying",
        "compression",
        "memorization",
    }
    assert all(t.overrides == {} for t in paper.tasks), "the paper budget uses MAD's own task settings"
    assert paper.batch_size == 128 and len(paper.lrs) * len(paper.weight_decays) == 6
    with pytest.raises(ConfigError):
        get_budget("huge")


@pytest.mark.parametrize(
    "changes",
    [
        {"steps": None},
        {"steps": 10, "epochs": 1.0},
        {"steps": 0},
        {"lrs": ()},
        {"batch_size": 0},
        {"warmup_fraction": 1.0},
    ],
)
def test_invalid_budgets_are_rejected(changes):
    with pytest.raises(ConfigError):
        TINY.replace(**changes)


def test_epoch_budgets_count_steps_from_the_train_split():
    budget = TINY.replace(steps=None, epochs=2.0, min_steps=5)
    assert budget.steps_for(TINY_TASKS[0]) == 16  # 2 * 64 / 8
    assert budget.replace(min_steps=50).steps_for(TINY_TASKS[0]) == 50


def test_result_fields_and_determinism():
    threads = torch.get_num_threads()
    rng_state = torch.random.get_rng_state()
    a = evaluate_pattern("AM", widths="tiny", budget=TINY, seed=3)
    b = evaluate_pattern("AM", widths="tiny", budget=TINY, seed=3)
    assert isinstance(a, MadResult)
    assert a.pattern == "AM" and a.budget == "test" and a.seed == 3 and not a.nonfinite
    assert list(a.accuracies) == ["in-context-recall", "selective-copying", "compression"]
    assert all(0.0 <= v <= 1.0 for v in a.accuracies.values())
    assert a.score == pytest.approx(sum(a.accuracies.values()) / 3)
    assert a.accuracies == b.accuracies and [t.train_loss for t in a.tasks] == [t.train_loss for t in b.tasks]
    assert all(t.steps == 3 and math.isfinite(t.train_loss) for t in a.tasks)
    assert 0 < a.train_seconds <= a.seconds
    assert a.to_dict()["tasks"][0]["task"]["name"] == "in-context-recall"
    assert torch.get_num_threads() == threads, "the evaluator leaves the thread count to its caller"
    assert torch.equal(torch.random.get_rng_state(), rng_state), "and the caller's global RNG alone"


def test_tasks_argument_overrides_the_budget_tasks_and_widths_may_be_an_arch_config():
    arch = get_preset("tiny").arch.replace(d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, ffn_dim=64)
    result = evaluate_pattern("MA", widths=arch, tasks=TINY_TASKS[:1], budget=TINY, seed=0)
    assert list(result.accuracies) == ["in-context-recall"] and result.pattern == "MA"


def test_repeated_tasks_are_labelled_apart():
    tasks = [TINY_TASKS[0], TINY_TASKS[0].replace(seq_len=8)]
    result = evaluate_pattern("A", widths="tiny", tasks=tasks, budget=TINY.replace(steps=1), seed=0)
    assert len(result.accuracies) == 2


def test_report_is_called_once_per_task_with_the_running_mean():
    calls: list[tuple[int, float]] = []
    result = evaluate_pattern(
        "AM", widths="tiny", budget=TINY, seed=0, report=lambda i, v: calls.append((i, v))
    )
    accuracies = list(result.accuracies.values())
    assert [i for i, _ in calls] == [0, 1, 2]
    for i, value in calls:
        assert value == pytest.approx(sum(accuracies[: i + 1]) / (i + 1))


def test_an_exception_from_report_stops_the_evaluation():
    class Pruned(Exception):
        pass

    calls = []

    def report(index, value):
        calls.append(index)
        raise Pruned

    with pytest.raises(Pruned):
        evaluate_pattern("AM", widths="tiny", budget=TINY, seed=0, report=report)
    assert calls == [0]


def test_a_diverging_candidate_fails_with_a_reason():
    budget = TINY.replace(steps=20, lrs=(1e6,), grad_clip=None)
    with pytest.raises(CandidateFailed) as info:
        evaluate_pattern("AM", widths="tiny", budget=budget, seed=0)
    assert "nan" in info.value.reason or "inf" in info.value.reason
    assert info.value.reason.startswith("AM: ") and info.value.task in {t.label for t in TINY_TASKS}
    recorded = evaluate_pattern("AM", widths="tiny", budget=budget, seed=0, on_nonfinite="record")
    assert recorded.nonfinite and recorded.failures and recorded.score < 1.0


def test_a_nan_loss_fails_the_candidate(monkeypatch):
    import composer.model

    def nan_loss(logits, targets, ignore_index=-100):
        return logits.sum() * float("nan")

    monkeypatch.setattr(composer.model, "cross_entropy", nan_loss)
    with pytest.raises(CandidateFailed, match="training loss is nan at step 0"):
        evaluate_pattern("AM", widths="tiny", tasks=TINY_TASKS[:1], budget=TINY, seed=0)


def test_bad_patterns_are_usage_errors():
    with pytest.raises(PatternError):
        evaluate_pattern("AXM", widths="tiny", budget=TINY)
    with pytest.raises(ConfigError):
        evaluate_pattern("AM", widths="tiny", budget=TINY, tasks=[])


def test_compression_auto_encoder_decodes_every_position_from_the_last_state():
    arch = get_preset("tiny").arch.with_pattern("AM").replace(vocab_size=16, max_seq_len=8)
    model = CompressionAutoEncoder(arch)
    ids = torch.randint(0, 16, (3, 8))
    out = model(ids, targets=ids)
    logits, loss = out.logits, out.loss
    assert logits.shape == (3, 8, 16) and torch.isfinite(loss)
    loss.backward()
    assert model.encoder.layers[0].primitive.wqkv.weight.grad.abs().sum() > 0
    code = model.encode(ids)
    assert code.shape == (3, arch.d_model)
    groups = model.parameter_groups(0.1)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_compression_logits_depend_on_the_sequence_only_through_the_last_state(monkeypatch):
    """A decoder reading every position's own state (or the input) would make compression a copy task. Here:
    (a) position 0's logits change with the *last* token, which a causal encoder shows only in the last state;
    (b) with that state held fixed, a different sequence gives the very same logits at every position."""
    torch.manual_seed(0)
    arch = get_preset("tiny").arch.with_pattern("AM").replace(vocab_size=16, max_seq_len=8)
    model = CompressionAutoEncoder(arch).eval()
    ids = torch.randint(0, 15, (2, 8))
    last_changed = ids.clone()
    last_changed[:, -1] = (ids[:, -1] + 1) % 15
    with torch.no_grad():
        base = model(ids).logits
        assert not torch.allclose(model(last_changed).logits[:, 0], base[:, 0])
        code = model.encode(ids)
        monkeypatch.setattr(model, "encode", lambda _ids: code)
        other = torch.randint(0, 15, (2, 8))
        torch.testing.assert_close(model(other).logits, base)


def test_vocabularies_round_up_to_a_multiple_of_eight():
    assert [round_up(v) for v in (8, 16, 17, 255, 256)] == [8, 16, 24, 256, 256]


def test_in_a_grid_a_diverged_cell_only_loses():
    budget = TINY.replace(tasks=TINY_TASKS[2:], steps=20, lrs=(1e-3, 1e6), grad_clip=None)
    result = evaluate_pattern("AM", widths="tiny", budget=budget, seed=0)
    assert not result.nonfinite and result.tasks[0].lr == 1e-3


def test_precision_auto_follows_the_hardware_and_the_result_records_it(monkeypatch):
    from composer import precision as hardware
    from search.mad import resolve_precision

    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("bf16", "cpu") == "bf16"
    for native, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda native=native: native)
        assert resolve_precision("auto", "cpu") == expected
    with pytest.raises(ConfigError, match="precision must be one of"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ConfigError, match="precision must be one of"):
        TINY.replace(precision="half")


def test_bf16_trains_under_autocast_and_scores_like_fp32():
    fp32 = evaluate_pattern("AM", widths="tiny", budget=TINY, seed=1, precision="fp32")
    bf16 = evaluate_pattern("AM", widths="tiny", budget=TINY, seed=1, precision="bf16")
    assert (fp32.precision, bf16.precision) == ("fp32", "bf16") and bf16.to_dict()["precision"] == "bf16"
    assert [t.train_loss for t in bf16.tasks] != [t.train_loss for t in fp32.tasks], "autocast was not applied"
    for a, b in zip(fp32.tasks, bf16.tasks):
        assert b.train_loss == pytest.approx(a.train_loss, rel=0.02)


@pytest.mark.slow
def test_a_compiled_candidate_scores_what_the_eager_one_scores():
    tasks = TINY_TASKS[:1]
    eager = evaluate_pattern("AM", widths="tiny", tasks=tasks, budget=TINY, seed=2, precision="fp32")
    torch._dynamo.utils.counters.clear()
    compiled = evaluate_pattern("AM", widths="tiny", tasks=tasks, budget=TINY, seed=2, precision="fp32", compile=True)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0, "compile=True compiled nothing"
    assert compiled.tasks[0].train_loss == pytest.approx(eager.tasks[0].train_loss, rel=1e-4)
    assert compiled.accuracies == eager.accuracies


def test_rate_scales_move_one_primitives_layers_to_their_own_rate():
    from search.mad.evaluate import scaled_rate_groups
    from search.mad.models import build_task_model

    torch.manual_seed(0)
    model = build_task_model(get_preset("tiny").arch.with_pattern("SAS").replace(vocab_size=32), "lm-shift")
    groups = scaled_rate_groups(model, model.parameter_groups(0.1), 1e-3, {"S": 0.1})
    mamba = {id(p) for i in (0, 2) for p in model.layers[i].parameters()}
    for group in groups:
        ids = {id(p) for p in group["params"]}
        assert ids <= mamba if group.get("lr") == pytest.approx(1e-4) else not ids & mamba
    assert sorted(id(p) for g in groups for p in g["params"]) == sorted(id(p) for p in model.parameters())
    assert {g["weight_decay"] for g in groups if g.get("lr")} == {0.1, 0.0}  # decay kept apart as before
