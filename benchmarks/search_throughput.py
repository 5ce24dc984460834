"""Search throughput: candidates per hour of Composer's MAD evaluator vs MAD's own Lightning training loop.

A search spends nearly all its time scoring candidates, so the number that matters is candidates per hour at
equal accuracy. Ours is ``search.mad.evaluate_pattern(pattern, budget=..., seed=..., precision=...)``, called
exactly as ``composer search`` calls it. The peer is a re-creation, inside this script, of the loop of MAD's
reference code (athms/mad-lab ``train.py`` and ``mad/model/pl_model_wrapper.py``):

* a ``LightningModule`` (mad-lab's ``PLModelWrap``) whose ``training_step`` and ``validation_step`` compute
  the cross-entropy outside the model, run a torchmetrics ``MetricCollection`` (accuracy, perplexity) and
  ``self.log`` loss and metrics on step and on epoch;
* torch ``DataLoader`` s (shuffled train, unshuffled test, no loader workers, mad-lab's default);
* ``Trainer.fit(module, train_dl, test_dl)``: Lightning's sanity check, then test-split validation after every
  epoch, as mad-lab runs it; then ``Trainer.validate(module, test_dl)`` gives the reported test accuracy.

Both sides train the identical model (``search.mad.build_task_model`` on the arch ``evaluate_pattern``
builds, same init seed) on identical data (``search.mad.make_dataset(task, seed)``, the same batches in the
same order) with the budget's optimizer steps, batch size, AdamW lr and weight decay, warmup + cosine schedule
(stepped per optimizer step), gradient clipping and precision, so both reach the same accuracy up to float
rounding; both sides' per-task accuracies are printed. Left out of the peer: checkpoint writing, the CSV
logger and the final ``validate`` on the train split (each only adds time), and early stopping at 99.9% test
accuracy (it would change the step count).

Reported per side: seconds per candidate (median over the patterns, and total), candidates per hour, mean
accuracy; ratios ours / peer at the same precision (``--precision``, fp32 by default) and ours at its default
precision (``auto``: bf16 autocast where the CPU computes bf16 natively) / peer. Timed candidates rotate which
side goes first, so drifting machine load hits all alike. Then (``--workers-grid 1,2``) candidates per hour of
our evaluator with N candidates running at once in N spawned processes of ``threads // N`` torch threads each,
as ``composer search --workers N`` runs them, against 1 process with all threads.

Run from the repository root::

    python benchmarks/search_throughput.py                  # cpu budget, 3 patterns, workers 1,2
    python benchmarks/search_throughput.py --json           # one JSON object instead of the table
    python benchmarks/search_throughput.py --budget smoke --steps 10 --patterns AMAMAM   # plumbing, ~1.5 min
    python benchmarks/search_throughput.py --precision bf16 --workers-grid ''            # bf16 pair, no grid

Needs ``lightning`` and ``torchmetrics`` (installed with Composer's training dependencies).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

# Plain script, not a package: make the repository root importable when run as ``python benchmarks/...``.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import torch  # noqa: E402

from composer.loss import IGNORE_INDEX  # noqa: E402
from composer.presets import get_preset  # noqa: E402
from search.mad import BUDGETS, build_task_model, evaluate_pattern, get_budget, make_dataset  # noqa: E402
from search.mad import resolve_precision  # noqa: E402
from search.mad.evaluate import _lr_lambda  # noqa: E402  (the schedule ours uses, so the peer's is identical)
from search.mad.models import round_up  # noqa: E402

DEFAULT_PATTERNS = ("AAMMMM", "AMAMAM", "MMMMAA")
LIGHTNING_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Candidates per hour of Composer's MAD evaluator against MAD's Lightning training loop "
        "(same model, data, steps, optimizer, schedule, clipping and precision), plus multi-process scaling.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--patterns", default=",".join(DEFAULT_PATTERNS), help="comma-separated layer patterns")
    p.add_argument("--budget", default="cpu", choices=sorted(BUDGETS), help="MAD budget (search.mad.BUDGETS)")
    p.add_argument("--steps", type=int, default=None,
                   help="override the budget's optimizer steps per task (both sides; for quick checks)")
    p.add_argument("--widths", default="search-1m", help="preset whose widths the candidates use")
    p.add_argument("--seed", type=int, default=0, help="data / init / batch-order seed (evaluate_pattern's)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"),
                   help="precision of the ours-vs-peer pair (ours at 'auto' is measured as well)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="torch threads of the in-process comparison; the workers grid splits this many")
    p.add_argument("--workers-grid", default="1,2",
                   help="process counts for the concurrency measurement ('' skips it)")
    p.add_argument("--workers-precision", default="auto", choices=("fp32", "bf16", "auto"),
                   help="precision of the concurrency measurement (composer search's default is auto)")
    p.add_argument("--peer-train-metrics", action=argparse.BooleanOptionalAction, default=True,
                   help="the peer computes and logs accuracy + perplexity every train step, as mad-lab does")
    p.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                   help="an untimed 3-step pass of each side over every task first (kernels, data cache)")
    p.add_argument("--json", action="store_true", help="print one JSON object with the figures, no table")
    args = p.parse_args(argv)
    args.patterns = [s.strip() for s in args.patterns.split(",") if s.strip()]
    if not args.patterns:
        p.error("--patterns is empty")
    try:
        args.workers_grid = [int(s) for s in args.workers_grid.split(",") if s.strip()]
    except ValueError:
        p.error("--workers-grid takes comma-separated integers, e.g. 1,2")
    if any(n < 1 for n in args.workers_grid):
        p.error("--workers-grid entries must be >= 1")
    if args.threads < 1:
        p.error("--threads must be positive")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be positive")
    return args


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def import_lightning():
    try:
        import lightning.pytorch as pl
        import torchmetrics
    except ModuleNotFoundError as err:
        if err.name not in ("lightning", "torchmetrics"):
            raise
        sys.exit("this benchmark needs lightning and torchmetrics: pip install lightning torchmetrics")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)  # "GPU available: False ..." and friends
    return pl, torchmetrics


# -- the arch, exactly as search/mad/evaluate.py builds it -----------------------------------------------


def task_arch(widths: str, pattern: str, task):
    base = get_preset(widths).arch.with_pattern(pattern)
    return base.replace(vocab_size=round_up(task.vocab_size, 8), max_seq_len=task.seq_len)


# -- the peer: mad-lab's PLModelWrap + pl.Trainer loop --------------------------------------------------


def make_peer_module_class(pl, torchmetrics):
    from torch import nn
    from torchmetrics.classification import MulticlassAccuracy
    from torchmetrics.text import Perplexity

    class Accuracy(MulticlassAccuracy):
        """mad-lab's ``mad.metrics.Accuracy`` (flatten, argmax), but over the task's own tokens and
        micro-averaged: the number ``evaluate_pattern`` reports (exact accuracy on the scored positions)."""

        def __init__(self, task_vocab: int, **kwargs) -> None:
            super().__init__(num_classes=task_vocab, average="micro", **kwargs)
            self.task_vocab = task_vocab

        def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
            preds = preds[..., : self.task_vocab].reshape(-1, self.task_vocab).argmax(dim=-1)
            super().update(preds=preds, target=target.reshape(-1))

    class MadLabModule(pl.LightningModule):
        """mad-lab's ``PLModelWrap``: loss outside the model, metrics logged per step and per epoch."""

        def __init__(self, model, task_vocab, steps, budget, lr, weight_decay, train_metrics=True) -> None:
            super().__init__()
            self.model = model
            self.loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
            self.steps, self.budget, self.lr, self.weight_decay = steps, budget, lr, weight_decay
            self.log_train_metrics = train_metrics
            mets = torchmetrics.MetricCollection(
                [Accuracy(task_vocab, ignore_index=IGNORE_INDEX), Perplexity(ignore_index=IGNORE_INDEX)]
            )
            self.train_metrics = mets.clone(prefix="train/")
            self.test_metrics = mets.clone(prefix="test/")
            self.late_losses: list[torch.Tensor] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x).logits

        def step(self, batch, batch_idx):
            inputs, targets = batch
            outputs = self(inputs)
            loss = self.loss_fn(outputs.view(-1, outputs.size(-1)), targets.view(-1))
            # Auxiliary terms (MoE load balancing) are part of our training objective; none for A/M patterns.
            owner = self.model.encoder if hasattr(self.model, "encoder") else self.model
            aux = owner.collect_aux_loss() if hasattr(owner, "collect_aux_loss") else None
            if aux is not None:
                loss = loss + aux
            return loss, outputs, targets

        def phase_step(self, batch, batch_idx, phase="train"):
            loss, outputs, targets = self.step(batch, batch_idx)
            self.log(f"{phase}/Loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
            if phase == "test" or self.log_train_metrics:
                metrics = getattr(self, f"{phase}_metrics")(outputs, targets)
                self.log_dict(metrics, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
            return {"loss": loss, "outputs": outputs, "targets": targets}

        def training_step(self, batch, batch_idx):
            out = self.phase_step(batch, batch_idx, phase="train")
            if self.global_step >= self.steps - max(1, self.steps // 10):
                self.late_losses.append(out["loss"].detach())
            return out

        def validation_step(self, batch, batch_idx):  # mad-lab: "we only use train/test", test is validated
            return self.phase_step(batch, batch_idx, phase="test")

        def configure_optimizers(self):
            # The model's own decay split (norms and what each primitive names are not decayed), as ours uses.
            optimizer = torch.optim.AdamW(self.model.parameter_groups(self.weight_decay), lr=self.lr)
            b = self.budget
            schedule = torch.optim.lr_scheduler.LambdaLR(
                optimizer, _lr_lambda(self.steps, b.warmup_fraction, b.min_lr_ratio)
            )
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    return MadLabModule


def peer_train_and_test(pl, module_cls, arch, data, budget, lr, wd, seed, device, precision, train_metrics):
    """One task, one (lr, wd) cell, through Lightning: (test accuracy, mean late train loss, steps)."""
    from torch.utils.data import DataLoader, RandomSampler, TensorDataset

    task = data.task
    steps = budget.steps_for(task)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):  # the same init as evaluate_pattern's
        torch.manual_seed(seed)
        model = build_task_model(arch, task.spec.model, device)
    n = len(data.train_inputs)
    train_set = TensorDataset(data.train_inputs, data.train_targets)
    train_dl = DataLoader(
        train_set,
        batch_size=min(budget.batch_size, n),
        # = shuffle=True, with the generator on the sampler: RandomSampler draws torch.randperm(n, generator)
        # per epoch, exactly as ours does with this seed, so both see the same batches in the same order. (A
        # DataLoader(generator=...) also draws its workers' base seed from it, shifting the permutations.)
        sampler=RandomSampler(train_set, generator=torch.Generator().manual_seed(seed + 1)),
        drop_last=True,  # ours drops an epoch's short last batch (no short batch in the built-in budgets)
        num_workers=0,
    )
    test_dl = DataLoader(
        TensorDataset(data.test_inputs, data.test_targets), batch_size=budget.eval_batch_size, shuffle=False,
        num_workers=0,
    )
    module = module_cls(model, data.vocab_size, steps, budget, lr, wd, train_metrics)
    trainer = pl.Trainer(
        accelerator="gpu" if device.type == "cuda" else "cpu",
        devices=1,
        max_steps=steps,
        max_epochs=-1,
        precision=LIGHTNING_PRECISION[precision],
        gradient_clip_val=budget.grad_clip,
        gradient_clip_algorithm="norm",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # num_workers / log_every_n_steps hints
        trainer.fit(module, train_dl, test_dl)
        result = trainer.validate(module, dataloaders=test_dl, verbose=False)[0]
    late = module.late_losses
    late_loss = float(torch.stack(late).mean()) if late else float("nan")
    return float(result["test/Accuracy_epoch"]), late_loss, trainer.global_step


def peer_evaluate(pl, module_cls, pattern, budget, seed, precision, widths, device, train_metrics):
    """The peer's candidate: every task of the budget, the best (lr, wd) cell per task, as ours scores."""
    started = time.perf_counter()
    accuracies, losses, steps = {}, {}, {}
    for index, task in enumerate(budget.tasks):
        data = make_dataset(task, seed)
        arch = task_arch(widths, pattern, task)
        best = None
        for lr in budget.lrs:
            for wd in budget.weight_decays:
                cell = peer_train_and_test(pl, module_cls, arch, data, budget, lr, wd, seed * 1_000 + index,
                                           device, precision, train_metrics)
                if best is None or cell[0] > best[0]:
                    best = cell
        accuracies[task.name], losses[task.name], steps[task.name] = best
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "score": sum(accuracies.values()) / len(accuracies), "accuracies": accuracies,
            "train_loss": losses, "steps": steps}


def ours_evaluate(pattern, budget, seed, precision, widths):
    started = time.perf_counter()
    r = evaluate_pattern(pattern, widths=widths, budget=budget, seed=seed, precision=precision)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "score": r.score,
            "accuracies": {t.task.name: t.accuracy for t in r.tasks},
            "train_loss": {t.task.name: t.train_loss for t in r.tasks},
            "steps": {t.task.name: t.steps for t in r.tasks}, "precision": r.precision}


def bench_budget(name: str, steps: int | None):
    """The named budget, with ``steps`` optimizer steps per task when given (both sides get the same)."""
    budget = get_budget(name)
    return budget if steps is None else budget.replace(steps=steps, epochs=None, min_steps=0)


def warm_budget(budget):
    return budget.replace(steps=3, epochs=None, min_steps=0, lrs=budget.lrs[:1],
                          weight_decays=budget.weight_decays[:1])


# -- concurrency: N spawned processes, threads split, as search/engine.py launch_workers does ----------


def _worker_main(index, threads, patterns, budget_name, steps, seed, precision, widths, warmup, ready, go,
                 results):
    torch.set_num_threads(threads)  # as search.engine._worker_main
    budget = bench_budget(budget_name, steps)
    if warmup:
        evaluate_pattern(patterns[0], widths=widths, budget=warm_budget(budget), seed=seed,
                         precision=precision)
    ready.put(index)
    go.wait()
    times, scores = [], []
    for pattern in patterns:
        t0 = time.perf_counter()
        r = evaluate_pattern(pattern, widths=widths, budget=budget, seed=seed, precision=precision)
        times.append(time.perf_counter() - t0)
        scores.append(r.score)
    results.put((index, times, scores))


def run_workers(n, total_threads, patterns, budget_name, steps, seed, precision, widths, warmup):
    threads = max(1, total_threads // n)
    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_worker_main,
                    args=(i, threads, patterns, budget_name, steps, seed, precision, widths, warmup, ready,
                          go, results))
        for i in range(n)
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in range(n):
            ready.get(timeout=1800)
        t0 = time.perf_counter()
        go.set()  # all workers imported and warmed up: start the clock
        out = [results.get(timeout=3600) for _ in range(n)]
        wall = time.perf_counter() - t0
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
    times = [t for _, ts, _ in out for t in ts]
    candidates = n * len(patterns)
    return {"workers": n, "threads_each": threads, "candidates": candidates, "wall_s": wall,
            "candidates_per_hour": 3600 * candidates / wall, "median_candidate_s": statistics.median(times),
            "mean_score": statistics.mean(s for _, _, ss in out for s in ss)}


# -- report ---------------------------------------------------------------------------------------------


def summarize(runs: dict[str, dict], precision: str, label: str) -> dict:
    seconds = [runs[p]["seconds"] for p in runs]
    tasks = list(next(iter(runs.values()))["accuracies"])
    total = sum(seconds)
    return {
        "label": label,
        "precision": precision,
        "seconds": {p: r["seconds"] for p, r in runs.items()},
        "median_candidate_s": statistics.median(seconds),
        "total_s": total,
        "candidates_per_hour": 3600 * len(seconds) / total,
        "mean_accuracy": statistics.mean(r["score"] for r in runs.values()),
        "task_accuracy": {t: statistics.mean(r["accuracies"][t] for r in runs.values()) for t in tasks},
        "scores": {p: r["score"] for p, r in runs.items()},
        "accuracies": {p: r["accuracies"] for p, r in runs.items()},
        "train_loss": {p: r["train_loss"] for p, r in runs.items()},
        "steps": next(iter(runs.values()))["steps"],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pl, torchmetrics = import_lightning()
    torch.set_num_threads(args.threads)
    budget = bench_budget(args.budget, args.steps)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # evaluate_pattern's default
    pair_precision = resolve_precision(args.precision, device)
    auto_precision = resolve_precision("auto", device)
    workers_precision = resolve_precision(args.workers_precision, device)
    module_cls = make_peer_module_class(pl, torchmetrics)
    started = time.perf_counter()
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None

    sides = {
        "ours": lambda p: ours_evaluate(p, budget, args.seed, pair_precision, args.widths),
        "peer": lambda p: peer_evaluate(pl, module_cls, p, budget, args.seed, pair_precision, args.widths,
                                        device, args.peer_train_metrics),
    }
    if auto_precision != pair_precision:
        sides["ours_auto"] = lambda p: ours_evaluate(p, budget, args.seed, auto_precision, args.widths)

    if args.warmup:  # untimed: first-call kernel setup, lazy imports, and the data cache both sides share
        wb = warm_budget(budget)
        log(f"warmup: 3 steps per task per side ({', '.join(sides)})")
        ours_evaluate(args.patterns[0], wb, args.seed, pair_precision, args.widths)
        peer_evaluate(pl, module_cls, args.patterns[0], wb, args.seed, pair_precision, args.widths, device,
                      args.peer_train_metrics)
        if "ours_auto" in sides:
            ours_evaluate(args.patterns[0], wb, args.seed, auto_precision, args.widths)

    runs: dict[str, dict[str, dict]] = {name: {} for name in sides}
    names = list(sides)
    for i, pattern in enumerate(args.patterns):
        order = names[i % len(names):] + names[: i % len(names)]  # rotate who goes first
        for name in order:
            r = sides[name](pattern)
            runs[name][pattern] = r
            log(f"{pattern} {name:<9} {r['seconds']:7.1f} s  score {r['score']:.4f}  "
                + "  ".join(f"{t} {a:.3f}" for t, a in r["accuracies"].items()))

    result = {
        "peer": f"mad-lab loop re-created: LightningModule + pl.Trainer (lightning {pl.__version__}, "
                f"torchmetrics {torchmetrics.__version__})",
        "torch": torch.__version__,
        "lightning": pl.__version__,
        "torchmetrics": torchmetrics.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "threads": args.threads,
        "budget": budget.name,
        "tasks": [t.label for t in budget.tasks],
        "config": {
            "patterns": args.patterns, "widths": args.widths, "seed": args.seed,
            "steps": {t.name: budget.steps_for(t) for t in budget.tasks}, "batch_size": budget.batch_size,
            "lrs": list(budget.lrs), "weight_decays": list(budget.weight_decays),
            "warmup_fraction": budget.warmup_fraction, "min_lr_ratio": budget.min_lr_ratio,
            "grad_clip": budget.grad_clip, "eval_batch_size": budget.eval_batch_size,
            "pair_precision": pair_precision, "auto_precision": auto_precision,
            "peer_train_metrics": args.peer_train_metrics, "warmup": args.warmup,
            "steps_override": args.steps,
        },
        "sides": {
            "ours": summarize(runs["ours"], pair_precision, f"ours evaluate_pattern ({pair_precision})"),
            "peer": summarize(runs["peer"], pair_precision,
                              f"peer mad-lab Lightning loop ({pair_precision})"),
        },
    }
    if "ours_auto" in runs:
        result["sides"]["ours_auto"] = summarize(runs["ours_auto"], auto_precision,
                                                 f"ours evaluate_pattern (auto = {auto_precision})")
    ours, peer = result["sides"]["ours"], result["sides"]["peer"]
    auto = result["sides"].get("ours_auto", ours)
    result["accuracy_gap_max"] = max(
        abs(ours["accuracies"][p][t] - peer["accuracies"][p][t])
        for p in args.patterns for t in ours["task_accuracy"]
    )
    # Mean loss of the last 10% of steps per task: same batches, same init, so these agree closely.
    result["train_loss_gap_max_rel"] = max(
        abs(ours["train_loss"][p][t] - peer["train_loss"][p][t]) / max(abs(ours["train_loss"][p][t]), 1e-8)
        for p in args.patterns for t in ours["task_accuracy"]
    )

    result["workers"] = []
    for n in args.workers_grid:
        log(f"workers: {n} process(es) x {max(1, args.threads // n)} thread(s), "
            f"{len(args.patterns)} candidates each ({workers_precision})")
        w = run_workers(n, args.threads, args.patterns, args.budget, args.steps, args.seed, workers_precision,
                        args.widths, args.warmup)
        result["workers"].append(w)
        log(f"workers {n}: {w['wall_s']:.1f} s wall, {w['candidates_per_hour']:.0f} candidates/h")
    result["workers_precision"] = workers_precision

    ratios = {
        "ours_over_peer_same_precision": ours["candidates_per_hour"] / peer["candidates_per_hour"],
        "ours_auto_over_peer": auto["candidates_per_hour"] / peer["candidates_per_hour"],
        # Cross-check on a shared machine: per pattern the sides ran back to back under similar load.
        "paired_median_same_precision": statistics.median(
            peer["seconds"][p] / ours["seconds"][p] for p in args.patterns),
    }
    base = next((w for w in result["workers"] if w["workers"] == 1), None)
    if base is not None:
        for w in result["workers"]:
            if w["workers"] != 1:
                key = f"workers_{w['workers']}_over_1"
                ratios[key] = w["candidates_per_hour"] / base["candidates_per_hour"]
    result["ratios"] = ratios
    result["wall_s"] = time.perf_counter() - started
    result["loadavg_start"] = load_start
    result["loadavg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    # Another job already using a core when we started: 2 threads on 2 shared cores slow down several-fold.
    result["busy"] = bool(load_start and load_start[0] >= 1.0)

    if args.json:
        print(json.dumps(result))
        return 0
    print_table(result)
    return 0


def print_table(result: dict) -> None:
    c = result["config"]
    sides = result["sides"]
    print("Search throughput: MAD candidates per hour, Composer's evaluator vs MAD's Lightning training loop")
    print(f"  torch {result['torch']}, lightning {result['lightning']}, torchmetrics "
          f"{result['torchmetrics']}, python {result['python']}, {result['device']}, "
          f"{result['threads']} threads")
    print(f"  budget {result['budget']}: {', '.join(result['tasks'])}")
    steps = ", ".join(f"{t} {s}" for t, s in c["steps"].items())
    print(f"  per task: {steps} steps, batch {c['batch_size']}, lr {c['lrs']}, wd {c['weight_decays']}, "
          f"warmup {c['warmup_fraction']:g}, cosine to {c['min_lr_ratio']:g} x lr, clip {c['grad_clip']}; "
          f"widths {c['widths']}, seed {c['seed']}")
    print(f"  patterns: {', '.join(c['patterns'])}; peer: {result['peer']}")
    if result["loadavg_start"]:
        start, end = result["loadavg_start"][0], result["loadavg_end"][0]
        print(f"  load average (1 min) at start / end: {start:.2f} / {end:.2f}")
    print()
    names = list(sides)
    heads = {"ours": f"ours {sides['ours']['precision']}", "peer": f"peer {sides['peer']['precision']}",
             "ours_auto": f"ours {sides.get('ours_auto', {}).get('precision', '')}"}
    print("  test accuracy per task, mean over patterns (both sides: same init, same batches, same order)")
    header = f"  {'task':<22}" + "".join(f"{heads[n]:>14}" for n in names)
    print(header)
    print("  " + "-" * (len(header) - 2))
    for task in sides["ours"]["task_accuracy"]:
        print(f"  {task:<22}" + "".join(f"{sides[n]['task_accuracy'][task]:>14.4f}" for n in names))
    for pattern in c["patterns"]:
        print(f"  {'score ' + pattern:<22}" + "".join(f"{sides[n]['scores'][pattern]:>14.4f}" for n in names))
    print(f"  largest per-task gap ours vs peer ({sides['ours']['precision']}): accuracy "
          f"{result['accuracy_gap_max']:.4f}, late train loss {100 * result['train_loss_gap_max_rel']:.2f}%")
    print()
    header = f"  {'side':<46} {'median s/cand':>13} {'total s':>9} {'cand/hour':>10} {'mean acc':>9}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for n in names:
        s = sides[n]
        print(f"  {s['label']:<46} {s['median_candidate_s']:>13.2f} {s['total_s']:>9.1f} "
              f"{s['candidates_per_hour']:>10.0f} {s['mean_accuracy']:>9.4f}")
    if result["workers"]:
        print()
        print(f"  concurrency, ours ({result['workers_precision']}): N spawned processes, threads split, "
              "each scoring every pattern")
        header = (f"  {'processes x threads':<22} {'candidates':>10} {'wall s':>8} {'median s/cand':>13} "
                  f"{'cand/hour':>10}")
        print(header)
        print("  " + "-" * (len(header) - 2))
        for w in result["workers"]:
            print(f"  {str(w['workers']) + ' x ' + str(w['threads_each']):<22} {w['candidates']:>10} "
                  f"{w['wall_s']:>8.1f} {w['median_candidate_s']:>13.2f} {w['candidates_per_hour']:>10.0f}")
    print()
    r = result["ratios"]
    print(f"  wall time of this run: {result['wall_s']:.0f} s")
    if result["busy"]:
        print(f"  note: load average {result['loadavg_start'][0]:.2f} at start: other jobs share the cores, "
              "so times are inflated and noisy; rerun on an idle machine or with --threads 1")
    print(f"  ratio ours/peer, candidates per hour, both {sides['ours']['precision']}: "
          f"{r['ours_over_peer_same_precision']:.3f}  "
          f"(paired per-pattern median {r['paired_median_same_precision']:.3f})")
    auto_side = sides.get("ours_auto", sides["ours"])
    print(f"  ratio ours ({auto_side['precision']}, default auto) / peer ({sides['peer']['precision']}): "
          f"{r['ours_auto_over_peer']:.3f}")
    for key, value in r.items():
        if key.startswith("workers_"):
            n = key.split("_")[1]
            print(f"  ratio {n} processes / 1 process, candidates per hour: {value:.3f}")


if __name__ == "__main__":
    sys.exit(main())
