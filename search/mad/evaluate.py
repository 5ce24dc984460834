"""Score a layer pattern on MAD tasks: train the candidate briefly on each task, measure test accuracy.

``evaluate_pattern("AAMMMM", budget="cpu", seed=0)`` builds, for every task of the budget,
``get_preset(widths).arch.with_pattern(pattern)`` with the task's vocabulary (rounded up to a multiple of 8) and
sequence length, trains it with AdamW (linear warmup, cosine decay) on the task's train split, and measures exact
token accuracy on the scored positions of the test split. The score is the mean accuracy over the tasks.

Beside it, every task also reports mad-lab's own figure, ``macro_accuracy`` (:func:`macro_accuracy`: torchmetrics'
class-averaged accuracy, as athms/mad-lab computes it), and the result its mean, ``macro_score``. The search score
and the choice of a task's lr x wd cell stay plain accuracy; the macro figure is that same cell's.

Budgets (``BUDGETS``; measured times and scores in ``docs/mad.md``):

* ``smoke`` (~10 s per 6-layer candidate on 2 CPU cores): the ``cpu`` recall and copying tasks plus MAD's
  memorization (vocab 256), 60 steps each. Checks the plumbing; its scores are rough.
* ``cpu`` (the default, ~15-25 s per candidate on 2 cores): 130 AdamW steps (batch 32, lr 1e-3) on each of
  in-context recall (vocab 16, seq len 32, 4,000 train / 256 test examples), selective copying (vocab 16, seq len
  32, 4 tokens to copy) and memorization (vocab 2048, 2,048 train examples). Recall and copying need sequence
  mixing and reward attention; memorization needs a one-token look-back and then MLP capacity, so attention-only
  patterns lose there. Left out, measured at the cpu budget's 130 steps (AAMMMM / AAAAAA / MMMMMM): noisy recall
  (0.37 / 0.31 / 0.12) tracks plain recall, the same mechanism, for a third more time; compression (0.18 / 0.19 /
  0.09, chance 0.07) trains an extra decoder for little separation; fuzzy recall (0.00 / 0.00 / 0.06) is not
  learnt at all in this budget.
* ``gpu``: MAD's six baseline tasks at MAD's sizes (12,800 / 1,280 examples), batch 128, 20 epochs (at least
  1,000 steps, for memorization's 256 examples), lr 1e-3.
* ``paper``: MAD's protocol: the six baseline tasks, 200 epochs, the best of lr {1e-4, 5e-4, 1e-3} x weight decay
  {0, 0.1} per task (six trainings per task), cosine decay to lr / 500, no warm-up.

Every budget trains under bf16 autocast where the device computes bf16 natively (CUDA GPUs; CPUs with AVX-512
BF16 or AMX) and in fp32 elsewhere (``precision="auto"``; ``"fp32"`` / ``"bf16"`` force one). ``compile=True``
compiles each candidate with ``torch.compile`` (worth it on GPUs at MAD's sizes; on CPU the compile time exceeds
a ``cpu`` candidate's training time).

MAD's full 66-setting sweep is ``search.mad.tasks.mad_benchmark_tasks()``; pass it as ``tasks=``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.loss import IGNORE_INDEX
from composer.precision import device_has_native_bf16
from composer.presets import get_preset
from search.mad.models import build_task_model, round_up
from search.mad.tasks import MadDataset, TaskConfig, make_dataset

Report = Callable[[int, float], None]
PRECISIONS = ("auto", "fp32", "bf16")
# mad-lab scores its test split in DataLoader batches of its batch size (MADConfig's default, 128) and reports
# the mean of the per-batch torchmetrics values (Lightning's on_epoch mean, weighted by batch size).
MAD_LAB_EVAL_BATCH = 128


class CandidateFailed(RuntimeError):
    """Training a candidate produced a non-finite loss or gradient; ``reason`` says where."""

    def __init__(self, reason: str, *, task: str | None = None, step: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.task = task
        self.step = step


@dataclass(frozen=True)
class Budget:
    """How much training each candidate gets, and on which tasks.

    Training length per task is ``steps`` optimizer steps, or else ``epochs`` passes over the train split
    (at least ``min_steps``). Every (lr, weight decay) cell of ``lrs`` x ``weight_decays`` is trained and each
    task keeps its best cell (MAD's protocol); one cell is the cheap default.
    """

    name: str
    tasks: tuple[TaskConfig, ...]
    steps: int | None = None
    epochs: float | None = None
    min_steps: int = 0
    batch_size: int = 32
    lrs: tuple[float, ...] = (1e-3,)
    weight_decays: tuple[float, ...] = (0.0,)
    warmup_fraction: float = 0.1
    min_lr_ratio: float = 0.01
    grad_clip: float | None = 1.0
    eval_batch_size: int = 256
    precision: str = "auto"  # auto: bf16 autocast where the device computes bf16 natively (composer.precision)
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "lrs", tuple(float(v) for v in self.lrs))
        object.__setattr__(self, "weight_decays", tuple(float(v) for v in self.weight_decays))
        if (self.steps is None) == (self.epochs is None):
            raise ConfigError(f"budget {self.name!r}: give exactly one of steps and epochs")
        if (self.steps is not None and self.steps < 1) or (self.epochs is not None and self.epochs <= 0):
            raise ConfigError(f"budget {self.name!r}: steps / epochs must be positive")
        if self.batch_size < 1 or self.eval_batch_size < 1:
            raise ConfigError(f"budget {self.name!r}: batch sizes must be positive")
        if not self.lrs or not self.weight_decays or min(self.lrs) <= 0 or min(self.weight_decays) < 0:
            raise ConfigError(f"budget {self.name!r}: needs positive lrs and non-negative weight decays")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"budget {self.name!r}: precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if not 0 <= self.warmup_fraction < 1 or not 0 <= self.min_lr_ratio <= 1:
            raise ConfigError(
                f"budget {self.name!r}: warmup_fraction must be in [0, 1), min_lr_ratio in [0, 1]"
            )

    @property
    def lr(self) -> float:
        return self.lrs[0]

    @property
    def weight_decay(self) -> float:
        return self.weight_decays[0]

    def steps_for(self, task: TaskConfig) -> int:
        if self.steps is not None:
            return self.steps
        return max(self.min_steps, math.ceil(self.epochs * task.num_train_examples / self.batch_size))

    def replace(self, **changes: Any) -> Budget:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class TaskResult:
    """One task's figures from its best lr x wd cell (best by plain ``accuracy``)."""

    task: TaskConfig
    accuracy: float  # exact token accuracy over the scored positions (the search score's)
    macro_accuracy: float  # mad-lab's class-averaged accuracy of the same cell (:func:`macro_accuracy`)
    train_loss: float  # mean of the last 10% of steps, best cell
    steps: int
    seconds: float
    lr: float
    weight_decay: float

    @property
    def label(self) -> str:
        return self.task.label


@dataclass(frozen=True)
class MadResult:
    """Per-task test accuracies and their mean (``score``, higher is better) for one pattern.

    ``macro_accuracies`` / ``macro_score`` are the same for mad-lab's class-averaged accuracy, derived from
    ``tasks``: reported beside the score, never ranked by.
    """

    pattern: str
    score: float
    accuracies: dict[str, float]
    tasks: tuple[TaskResult, ...]
    train_seconds: float  # optimizer steps and evaluation only
    seconds: float  # everything, data generation and model building included
    budget: str
    seed: int
    nonfinite: bool = False  # a task stopped at a non-finite loss (only with on_nonfinite="record")
    failures: dict[str, str] = field(default_factory=dict)
    precision: str = "fp32"  # what the candidate trained in, ``auto`` resolved

    @property
    def macro_accuracies(self) -> dict[str, float]:
        """mad-lab's macro accuracy per task, keyed as ``accuracies``."""
        return _labelled(self.tasks, lambda r: r.macro_accuracy)

    @property
    def macro_score(self) -> float:
        """Mean macro accuracy over the tasks: the number mad-lab's benchmark would report for this run."""
        return sum(r.macro_accuracy for r in self.tasks) / len(self.tasks)

    def details(self) -> dict[str, Any]:
        """What a search records per trial beside the score: both accuracies per task and the macro mean."""
        return {"accuracy": dict(self.accuracies), "macro_accuracy": self.macro_accuracies,
                "macro_score": self.macro_score}

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "score": self.score,
            "accuracies": dict(self.accuracies),
            "macro_score": self.macro_score,
            "macro_accuracies": self.macro_accuracies,
            "train_seconds": self.train_seconds,
            "seconds": self.seconds,
            "budget": self.budget,
            "seed": self.seed,
            "precision": self.precision,
            "nonfinite": self.nonfinite,
            "failures": dict(self.failures),
            "tasks": [
                {
                    "task": r.task.to_dict(),
                    "accuracy": r.accuracy,
                    "macro_accuracy": r.macro_accuracy,
                    "train_loss": r.train_loss,
                    "steps": r.steps,
                    "seconds": r.seconds,
                    "lr": r.lr,
                    "weight_decay": r.weight_decay,
                }
                for r in self.tasks
            ],
        }


# -- budgets ---------------------------------------------------------------------------------------------------

_CPU_TASKS = (
    TaskConfig("in-context-recall", seq_len=32, num_train_examples=4000, num_test_examples=256),
    TaskConfig(
        "selective-copying", seq_len=32, num_tokens_to_copy=4, num_train_examples=4000, num_test_examples=256
    ),
    TaskConfig("memorization", vocab_size=2048, seq_len=32, num_train_examples=2048, num_test_examples=256),
)
# MAD's six baseline tasks at MAD's own sizes (Poli et al. 2024), for the GPU budgets
_MAD_TASKS = tuple(
    TaskConfig(name)
    for name in (
        "in-context-recall",
        "fuzzy-in-context-recall",
        "noisy-in-context-recall",
        "selective-copying",
        "compression",
        "memorization",
    )
)
_SMOKE_TASKS = (*_CPU_TASKS[:2], TaskConfig("memorization", seq_len=32, num_test_examples=256))

BUDGETS: dict[str, Budget] = {
    budget.name: budget
    for budget in (
        Budget(
            name="smoke",
            tasks=_SMOKE_TASKS,
            steps=60,
            batch_size=32,
            lrs=(1e-3,),
            description="plumbing check, ~10 s per candidate on 2 CPU cores",
        ),
        Budget(
            name="cpu",
            tasks=_CPU_TASKS,
            steps=130,
            batch_size=32,
            lrs=(1e-3,),
            description="the default: ranks patterns on CPU, ~15-25 s per candidate on 2 cores",
        ),
        Budget(
            name="gpu",
            tasks=_MAD_TASKS,
            epochs=20,
            min_steps=1000,
            batch_size=128,
            lrs=(1e-3,),
            description="MAD's six baseline tasks at MAD's sizes, 20 epochs, one lr/wd cell",
        ),
        Budget(
            name="paper",
            tasks=_MAD_TASKS,
            epochs=200,
            batch_size=128,
            lrs=(1e-4, 5e-4, 1e-3),
            weight_decays=(0.0, 0.1),
            warmup_fraction=0.0,
            min_lr_ratio=0.002,
            description="MAD's protocol: six baseline tasks, 200 epochs, best of lr {1e-4,5e-4,1e-3} x wd {0,0.1}",
        ),
    )
}


def get_budget(budget: Budget | str) -> Budget:
    if isinstance(budget, Budget):
        return budget
    try:
        return BUDGETS[budget]
    except KeyError:
        raise ConfigError(f"unknown MAD budget {budget!r}; choose one of: {', '.join(BUDGETS)}") from None


# -- training --------------------------------------------------------------------------------------------------


def _lr_lambda(steps: int, warmup_fraction: float, min_ratio: float) -> Callable[[int], float]:
    warmup = int(warmup_fraction * steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def batch_indices(n: int, batch_size: int, steps: int, generator: torch.Generator):
    """Indices of ``steps`` batches: shuffled epochs, cycled; a short last batch of an epoch is dropped."""
    batch_size = min(batch_size, n)
    per_epoch = n // batch_size
    done = 0
    while done < steps:
        order = torch.randperm(n, generator=generator)
        for b in range(per_epoch):
            if done == steps:
                return
            yield order[b * batch_size : (b + 1) * batch_size]
            done += 1


class NonFinite(Exception):
    """A diverged cell: a non-finite loss, gradient norm or test logit, or a loss that blew up and stayed up
    (``composer.training.divergence``), at ``step`` (-1: on the test split)."""

    def __init__(self, reason: str, step: int) -> None:
        super().__init__(reason)
        self.reason, self.step = reason, step


def seeded_task_model(arch: ArchConfig, kind: str, seed: int, device: torch.device,
                      compile: bool = False) -> torch.nn.Module:
    """The task model initialised from ``seed`` alone (the caller's global RNG is left as it was), compiled if
    asked: the same pattern and seed give the same weights whatever ran before."""
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        model = build_task_model(arch, kind, device)
    if compile:
        from composer.training.parallelize import apply_compile

        apply_compile(model)
    return model


def scaled_rate_groups(model: torch.nn.Module, groups: list[dict], lr: float,
                       rate_scales: Mapping[str, float]) -> list[dict]:
    """``groups`` with the parameters of each layer whose symbol is in ``rate_scales`` moved to groups of their own
    at ``lr * scale`` (the schedule then scales every group alike). ``model.layers`` follow ``model.arch.layers``."""
    scale_of = {id(p): rate_scales[symbol] for symbol, layer in zip(model.arch.layers, model.layers, strict=True)
                if symbol in rate_scales for p in layer.parameters()}
    out = []
    for group in groups:
        out.append({**group, "params": [p for p in group["params"] if id(p) not in scale_of]})
        for scale in sorted(set(scale_of.values())):
            moved = [p for p in group["params"] if scale_of.get(id(p)) == scale]
            if moved:
                out.append({**group, "params": moved, "lr": lr * scale})
    return out


def fit(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor, str]],
    steps: int,
    *,
    lr: float,
    weight_decay: float,
    warmup_fraction: float,
    min_lr_ratio: float,
    grad_clip: float | None,
    autocast: Callable[[], Any] = contextlib.nullcontext,
    rate_scales: Mapping[str, float] | None = None,
) -> float:
    """Train ``model`` for ``steps`` batches of ``(inputs, targets, where)``; return the mean training loss over the
    last tenth of the steps.

    AdamW on the model's own parameter groups (no decay where a primitive says so), linear warmup then cosine to
    ``min_lr_ratio``, optional gradient clipping. ``where`` (e.g. ``" (length 256)"``) is appended to the step in
    a failure's reason. A non-finite loss or gradient norm raises :class:`NonFinite` at once, and so does a finite
    loss that blew up by ``composer.training.divergence``'s rule (the same one ``composer train`` applies): a
    diverged candidate is recorded, not trained on.
    """
    from composer.training.divergence import BlowupRule

    blowup = BlowupRule(vocab_size=model.arch.vocab_size)
    groups = model.parameter_groups(weight_decay)
    if rate_scales:  # some primitives' layers at a multiple of the rate (the recall probe's Mamba-2)
        groups = scaled_rate_groups(model, groups, lr, rate_scales)
    optimizer = torch.optim.AdamW(groups, lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(steps, warmup_fraction, min_lr_ratio))
    tail = max(1, steps // 10)
    late_losses: list[float] = []
    model.train()
    for step, (inputs, targets, where) in enumerate(batches):
        with autocast():
            loss = model(inputs, targets=targets).loss
        value = loss.item()
        if not math.isfinite(value):
            raise NonFinite(f"training loss is {value} at step {step}{where}", step)
        if blowup.update(step, value) or (step == steps - 1 and blowup.finish(step)):
            raise NonFinite(f"{blowup.reason()}, at step {step}{where}", step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if not torch.isfinite(norm):
                raise NonFinite(f"gradient norm is {norm.item()} at step {step}{where}", step)
        optimizer.step()
        schedule.step()
        if step >= steps - tail:
            late_losses.append(value)
    return sum(late_losses) / len(late_losses)


def _train_and_test(
    arch: ArchConfig,
    data: MadDataset,
    budget: Budget,
    lr: float,
    weight_decay: float,
    seed: int,
    device: torch.device,
    precision: str = "fp32",
    compile: bool = False,
) -> tuple[float, float, float, int]:
    """Plain and macro accuracy on the test split, mean late training loss, steps. Raises ``NonFinite``."""
    steps = budget.steps_for(data.task)
    model = seeded_task_model(arch, data.task.spec.model, seed, device, compile)
    generator = torch.Generator().manual_seed(seed + 1)
    inputs, targets = data.train_inputs.to(device), data.train_targets.to(device)
    batches = ((inputs[idx], targets[idx], "") for idx in
               (i.to(device) for i in batch_indices(len(inputs), budget.batch_size, steps, generator)))
    autocast = autocast_for(precision, device)
    late_loss = fit(model, batches, steps, lr=lr, weight_decay=weight_decay, warmup_fraction=budget.warmup_fraction,
                    min_lr_ratio=budget.min_lr_ratio, grad_clip=budget.grad_clip, autocast=autocast)
    predictions, targets = held_out_predictions(model, data, budget.eval_batch_size, device, autocast)
    macro = macro_accuracy(predictions, targets, data.vocab_size)
    return plain_accuracy(predictions, targets), macro, late_loss, steps


def resolve_precision(requested: str, device: torch.device | str) -> str:
    """``auto`` -> ``bf16`` where ``device`` computes bf16 natively, else ``fp32``; anything else as given."""
    if requested not in PRECISIONS:
        raise ConfigError(f"MAD precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested != "auto":
        return requested
    return "bf16" if device_has_native_bf16(device) else "fp32"


def autocast_for(precision: str, device: torch.device) -> Callable[[], Any]:
    if precision == "bf16":
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


@torch.no_grad()
def held_out_predictions(
    model: torch.nn.Module,
    data: MadDataset,
    batch_size: int,
    device: torch.device,
    autocast: Callable[[], Any] = contextlib.nullcontext,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(predictions, targets)`` over the whole test split, ``[N, seq_len]`` on the CPU: the argmax among the
    task's own tokens at every position, and the targets (``IGNORE_INDEX`` where nothing is scored). Kept whole so
    that both accuracies are computed from one forward pass."""
    model.eval()
    vocab = data.vocab_size
    predictions = []
    for start in range(0, len(data.test_inputs), batch_size):
        x = data.test_inputs[start : start + batch_size].to(device)
        with autocast():
            logits = model(x).logits[..., :vocab].float()
        if not torch.isfinite(logits).all():
            raise NonFinite("non-finite logits on the test split", -1)
        predictions.append(logits.argmax(-1).cpu())
    return torch.cat(predictions), data.test_targets


def plain_accuracy(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """Exact token accuracy over the scored positions (targets other than ``IGNORE_INDEX``): the search score."""
    mask = targets != IGNORE_INDEX
    return (predictions[mask] == targets[mask]).sum().item() / max(mask.sum().item(), 1)


def macro_accuracy(
    predictions: torch.Tensor, targets: torch.Tensor, num_classes: int, batch_size: int = MAD_LAB_EVAL_BATCH
) -> float:
    """mad-lab's test accuracy: class-averaged, per batch of ``batch_size`` sequences, then averaged over batches.

    athms/mad-lab (``mad/metrics.py``, ``mad/model/pl_model_wrapper.py``) scores with torchmetrics'
    ``MulticlassAccuracy(num_classes=vocab_size, ignore_index=-100)``, whose ``average`` defaults to ``"macro"``:
    each class's recall tp / (tp + fn), averaged over the classes that occur as a target *or* a prediction in the
    batch (a class predicted but never a target counts 0; one neither predicted nor a target does not count). It
    logs the per-batch value with ``on_epoch=True``, so the reported figure is the batch-size-weighted mean over
    test batches of 128 sequences, not one macro average over the whole split; this computes exactly that, with
    torchmetrics itself. Why report it: it is the number mad-lab's benchmark reports and keeps the best cell by,
    and rare target tokens weigh in it as much as frequent ones.
    """
    from torchmetrics.functional.classification import multiclass_accuracy  # ~1-4 s import: only when scoring

    if predictions.shape != targets.shape or predictions.dim() != 2:
        shapes = f"{tuple(predictions.shape)} and {tuple(targets.shape)}"
        raise ConfigError(f"macro accuracy: predictions and targets need one [N, seq_len] shape, got {shapes}")
    if num_classes < 2 or batch_size < 1:
        raise ConfigError(f"macro accuracy needs num_classes >= 2 and batch_size >= 1, got {num_classes}, {batch_size}")
    weighted = 0.0
    for start in range(0, len(targets), batch_size):
        p, t = predictions[start : start + batch_size], targets[start : start + batch_size]
        value = multiclass_accuracy(p.reshape(-1), t.reshape(-1), num_classes=num_classes, average="macro",
                                    ignore_index=IGNORE_INDEX)
        weighted += value.item() * len(t)
    return weighted / max(len(targets), 1)


def held_out_accuracy(
    model: torch.nn.Module,
    data: MadDataset,
    batch_size: int,
    device: torch.device,
    autocast: Callable[[], Any] = contextlib.nullcontext,
) -> float:
    """Exact token accuracy over the scored positions (argmax among the task's own tokens)."""
    return plain_accuracy(*held_out_predictions(model, data, batch_size, device, autocast))


def resolve_widths(widths: str | ArchConfig) -> ArchConfig:
    if isinstance(widths, ArchConfig):
        return widths
    return get_preset(widths).arch


def evaluate_pattern(
    pattern: str,
    *,
    widths: str | ArchConfig = "search-1m",
    tasks: Sequence[TaskConfig] | None = None,
    budget: Budget | str = "cpu",
    seed: int = 0,
    report: Report | None = None,
    device: torch.device | str | None = None,
    on_nonfinite: str = "raise",
    precision: str | None = None,
    compile: bool = False,
) -> MadResult:
    """Train ``pattern`` on every task (default: the budget's) and return test accuracies and their mean.

    ``widths`` is a preset name or an :class:`ArchConfig` whose widths are used (its pattern, vocabulary and
    length are replaced). ``seed`` fixes the data (``make_dataset(task, seed)``), the initialisation and the
    batch order: the same call gives the same result. ``report(task_index, mean_accuracy_so_far)`` is called after
    each task; whatever it raises (e.g. ``optuna.TrialPruned``) propagates. A non-finite loss, gradient norm or
    test logit raises :class:`CandidateFailed`, or with ``on_nonfinite="record"`` scores that task 0 and sets
    ``nonfinite`` (with an lr x wd grid, a diverged cell just scores 0; the task fails when every cell does).
    ``device`` defaults to CUDA when available. Thread count is the caller's (``torch.set_num_threads``).
    ``precision`` (``auto``, ``fp32``, ``bf16``; default: the budget's, ``auto``) and ``compile`` as in the module
    docstring; the result records the precision used.
    """
    if on_nonfinite not in ("raise", "record"):
        raise ConfigError(f"on_nonfinite must be 'raise' or 'record', got {on_nonfinite!r}")
    started = time.perf_counter()
    budget = get_budget(budget)
    tasks = tuple(budget.tasks if tasks is None else tasks)
    if not tasks:
        raise ConfigError("no MAD tasks to evaluate")
    for task in tasks:
        if not isinstance(task, TaskConfig):
            raise ConfigError(f"tasks must be TaskConfig objects, got {task!r}")
    base = resolve_widths(widths).with_pattern(pattern)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = resolve_precision(precision or budget.precision, device)

    results: list[TaskResult] = []
    failures: dict[str, str] = {}
    train_seconds = 0.0
    for index, task in enumerate(tasks):
        data = make_dataset(task, seed)
        arch = base.replace(vocab_size=round_up(task.vocab_size, 8), max_seq_len=task.seq_len)
        best: TaskResult | None = None
        task_started = time.perf_counter()
        cell_failures: list[tuple[str, int]] = []
        for lr in budget.lrs:
            for wd in budget.weight_decays:
                cell_started = time.perf_counter()
                try:
                    accuracy, macro, loss, steps = _train_and_test(
                        arch, data, budget, lr, wd, seed * 1_000 + index, device, precision, compile
                    )
                except NonFinite as err:  # a diverged cell scores 0; the task fails when every cell diverged
                    cell_failures.append((f"{task.label} (lr {lr:g}, wd {wd:g}): {err.reason}", err.step))
                    accuracy, macro, loss, steps = 0.0, 0.0, float("nan"), err.step
                train_seconds += time.perf_counter() - cell_started
                if best is None or accuracy > best.accuracy:  # MAD keeps the cell with the best plain accuracy
                    best = TaskResult(task, accuracy, macro, loss, steps, 0.0, lr, wd)
        if len(cell_failures) == len(budget.lrs) * len(budget.weight_decays):
            reason, step = cell_failures[0]
            if on_nonfinite == "raise":
                raise CandidateFailed(f"{pattern}: {reason}", task=task.label, step=step)
            failures[task.label] = reason
        assert best is not None
        results.append(dataclasses.replace(best, seconds=time.perf_counter() - task_started))
        if report is not None:
            report(index, sum(r.accuracy for r in results) / len(results))

    accuracies = _labelled(results)
    return MadResult(
        pattern=base.pattern,
        score=sum(r.accuracy for r in results) / len(results),
        accuracies=accuracies,
        tasks=tuple(results),
        train_seconds=train_seconds,
        seconds=time.perf_counter() - started,
        budget=budget.name,
        seed=seed,
        nonfinite=bool(failures),
        failures=failures,
        precision=precision,
    )


def _labelled(
    results: Sequence[TaskResult], value: Callable[[TaskResult], float] = lambda r: r.accuracy
) -> dict[str, float]:
    """``value`` of each task, keyed by task name; by label (name plus changed knobs) where a name repeats."""
    names = [r.task.name for r in results]
    accuracies: dict[str, float] = {}
    for r in results:
        label = r.task.name if names.count(r.task.name) == 1 else r.label
        suffix = 2
        while label in accuracies:  # the same task twice: keep both
            label, suffix = f"{r.label}#{suffix}", suffix + 1
        accuracies[label] = value(r)
    return accuracies


def describe_budgets(budgets: Mapping[str, Budget] | None = None) -> str:
    lines = []
    for b in (budgets or BUDGETS).values():
        length = (
            f"{b.steps} steps" if b.steps is not None else f"{b.epochs:g} epochs (>= {b.min_steps} steps)"
        )
        lines.append(
            f"{b.name}: {length}, batch {b.batch_size}, lr {b.lrs}, wd {b.weight_decays}; "
            + ", ".join(t.label for t in b.tasks)
        )
    return "\n".join(lines)
