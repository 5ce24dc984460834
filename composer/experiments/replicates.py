"""Train several architectures once per seed, resumably: the runs behind every seeded comparison.

``composer pipeline`` (composite against baselines) and ``composer transfer`` (search score against target loss)
both need the same thing: every (architecture, seed) pair trained on the same data, tokens and schedule, each in
its own run directory ``<root>/<name>/seed-<s>/``, and nothing finished ever trained again. A pair is finished
when its ``summary.json`` exists; a pair with checkpoints but no summary continues from its newest checkpoint.

A finished run is reused only if it was trained with the settings asked for now: re-running with another
``--tokens`` or learning rate must not silently mix old and new runs in one table, so a mismatch is an error
that names the setting and the directory.

Runs go seed-major (every architecture at the first seed, then every architecture at the next), so a pipeline
killed half-way already holds complete, comparable seeds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.training.config import TrainConfig

# TrainConfig fields that change what a run computes; the others (logging, paths, W&B, loader workers) do not.
RESULT_FIELDS = (
    "arch", "preset", "options", "data", "tokenizer", "text_field", "val_fraction", "data_seed", "max_documents",
    "tokens", "seq_len", "batch_size", "lr", "min_lr_ratio", "schedule", "warmup", "decay_fraction",
    "weight_decay", "beta1", "beta2", "eps", "grad_clip", "precision", "seed", "val_tokens",
)


@dataclass(frozen=True)
class Replicate:
    """One training of one architecture at one seed."""

    name: str  # the architecture's name in the comparison (a model name or a source pattern)
    pattern: str  # canonical pattern trained at the target widths
    seed: int
    config: TrainConfig

    @property
    def out(self) -> Path:
        return Path(self.config.out)


def parse_seeds(seeds: Any) -> list[int]:
    """Training seeds from a recipe or a flag.

    A list names the seeds (``[0, 1, 2]``); a bare integer is a count (``3`` means seeds 0, 1, 2), as is text
    without a comma (``--seeds 3``); comma-separated text names them (``--seeds 0,1,2``; ``--seeds 5,`` is the
    single seed 5).
    """
    if isinstance(seeds, str):
        text = seeds.replace(" ", "")
        try:
            seeds = [int(part) for part in text.split(",") if part] if "," in text else int(text)
        except ValueError:
            raise ConfigError(f"seeds must be a count such as 3 or comma-separated seeds such as 0,1,2, "
                              f"got {seeds!r}") from None
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ConfigError(f"the number of seeds must be at least 1, got {seeds}")
        seeds = list(range(seeds))
    if not isinstance(seeds, (list, tuple)) or not seeds or not all(
        isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in seeds
    ):
        raise ConfigError(f"seeds must be a non-empty list of integers >= 0 such as [0, 1, 2], got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds must be distinct, got {list(seeds)}")
    return list(seeds)


def run_dir(root: Path, name: str, seed: int) -> Path:
    return root / name / f"seed-{seed}"


def plan_replicates(
    models: Mapping[str, str], seeds: Iterable[int], root: Path, base: Mapping[str, Any], preset: str,
    run_prefix: str = "", per_model: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Replicate]:
    """Seed-major list of every (model, seed) run; ``base`` holds the shared TrainConfig fields and
    ``per_model[name]`` a model's own (its swept learning rate, ``composer.experiments.lr_sweep``)."""
    plan = []
    for seed in seeds:
        for name, pattern in models.items():
            out = run_dir(root, name, seed)
            own = (per_model or {}).get(name, {})
            config = TrainConfig(**{**base, **own, "arch": pattern, "preset": preset, "seed": seed, "out": str(out),
                                    "run_name": f"{run_prefix}{name}-seed{seed}"})
            plan.append(Replicate(name, pattern, seed, config))
    return plan


def finished_summary(replicate: Replicate) -> dict[str, Any] | None:
    """The run's summary when it finished with the settings ``replicate`` asks for; None when not finished.

    Raises ``ConfigError`` when it finished with other settings (see the module docstring).
    """
    path = replicate.out / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    config_path = replicate.out / "config.json"
    trained = json.loads(config_path.read_text()).get("train", {}) if config_path.is_file() else {}
    wanted = replicate.config.to_dict()
    changed = [key for key in RESULT_FIELDS if key in trained and trained[key] != wanted[key]]
    if summary.get("pattern") != replicate.pattern:
        changed.insert(0, "arch")
    if changed:
        details = ", ".join(f"{key}={trained.get(key)!r} (now {wanted[key]!r})" for key in changed)
        raise ConfigError(f"{replicate.out} was trained with other settings: {details}; delete it to retrain, "
                          "or choose another --out")
    return summary


def run_replicates(plan: list[Replicate], echo: Callable[[str], None] = print,
                   workers: int = 1, after: Callable[[Replicate, dict], None] | None = None
                   ) -> dict[tuple[str, int], dict]:
    """Train every unfinished run of ``plan`` and return ``{(name, seed): summary}`` for all of them.

    ``workers`` > 1 trains that many runs at once, each in its own spawned process: small models leave most of a
    GPU (or of a many-core CPU) idle, so a transfer's hundred short runs finish several times sooner side by side.
    Each process gets an equal share of the CPU threads; every process uses the same GPU.

    Progress: one line per run with its position, and an ETA from the mean wall time of the runs trained in
    this call. A run that diverged (``composer train`` stops it at the first non-finite loss and writes a summary
    with ``diverged: true`` and no ``val_loss``) is returned as it is, and reported as diverged, never as a loss;
    the callers' statistics drop it and say so.

    ``after(replicate, summary)`` is called for every run of ``plan`` once it has its summary, trained now or
    before (a measurement of the trained model, ``composer pipeline``'s recall, kept in the run beside it): right
    after its training when runs train one at a time.
    """
    check_workers(workers)
    finished = {(r.name, r.seed): finished_summary(r) for r in plan}  # read once: it parses two JSON files
    pending = [r for r in plan if finished[(r.name, r.seed)] is None]
    if len(pending) < len(plan):
        echo(f"   {len(plan) - len(pending)} of {len(plan)} runs already finished; not trained again")
    if workers > 1 and len(pending) > 1:
        finished.update(_train_side_by_side(pending, workers, echo))
    summaries: dict[tuple[str, int], dict] = {}
    durations: list[float] = []
    for replicate in plan:
        summary = finished[(replicate.name, replicate.seed)]
        if summary is None:
            position = len(durations) + 1
            eta = ""
            if durations:
                left = (len(pending) - len(durations)) * sum(durations) / len(durations)
                eta = f", ETA {_duration(left)} for the {len(pending) - len(durations)} left"
            echo(f"== train {position}/{len(pending)}: {replicate.name} seed {replicate.seed} "
                 f"{replicate.pattern} ({replicate.config.tokens:,} tokens{_resuming(replicate)}{eta})")
            started = time.perf_counter()
            summary = train_replicate(replicate, echo)
            durations.append(time.perf_counter() - started)
            echo(_result_line(replicate, summary))
        if summary.get("val_loss") is None and not summary.get("diverged"):
            raise RuntimeError(f"{replicate.out} finished without a validation loss; its summary.json is "
                               "unusable, delete it and re-run")
        summaries[(replicate.name, replicate.seed)] = summary
        if after is not None:
            after(replicate, summary)
    return summaries


def check_workers(workers: Any) -> None:
    """``workers`` (runs trained at once) is a positive integer; a config checks it before anything trains."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a positive integer (runs trained at once), got {workers!r}")


def train_replicate(replicate: Replicate, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Train one run (continuing from its newest checkpoint) and return its summary; a diverged run's summary is
    returned as it is, any other failure raises."""
    from composer.errors import ComposerRunError
    from composer.training.checkpoint import latest_checkpoint
    from composer.training.run import train

    resume = latest_checkpoint(replicate.out / "checkpoints") is not None
    try:
        return train(replicate.config, resume=resume)
    except ComposerRunError as err:
        summary = finished_summary(replicate)
        if summary is None or not summary.get("diverged"):
            raise
        echo(f"   {replicate.name} seed {replicate.seed}: {err}")
        return summary


def _resuming(replicate: Replicate) -> str:
    from composer.training.checkpoint import latest_checkpoint

    return ", resuming" if latest_checkpoint(replicate.out / "checkpoints") is not None else ""


def _result_line(replicate: Replicate, summary: Mapping[str, Any]) -> str:
    if summary.get("diverged"):
        return f"   {replicate.name} seed {replicate.seed}: diverged"
    speed, loss = summary.get("tokens_per_s"), summary.get("val_loss")
    return (f"   {replicate.name} seed {replicate.seed}: val_loss {'n/a' if loss is None else f'{loss:.4f}'} "
            f"({'n/a' if speed is None else f'{speed:,.0f}'} tokens/s)")


def _limit_threads(threads: int) -> None:
    """A worker process's share of the CPU threads, so ``workers`` processes do not oversubscribe the cores."""
    import torch

    torch.set_num_threads(threads)


def _train_side_by_side(pending: list[Replicate], workers: int, echo: Callable[[str], None]
                        ) -> dict[tuple[str, int], dict]:
    """Train ``pending`` ``workers`` at a time in spawned processes (fork is unsafe once CUDA or OpenMP threads
    exist); the first failure cancels the runs not yet started and is raised."""
    import multiprocessing
    import os
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    workers = min(workers, len(pending))
    threads = max(1, (os.cpu_count() or 1) // workers)
    echo(f"   training {len(pending)} runs, {workers} at a time ({threads} CPU thread(s) each)")
    started = time.perf_counter()
    done: dict[tuple[str, int], dict] = {}
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_limit_threads,
                             initargs=(threads,)) as pool:
        futures = {pool.submit(train_replicate, replicate, _quiet): replicate for replicate in pending}
        waiting = set(futures)
        while waiting:
            finished, waiting = wait(waiting, return_when=FIRST_COMPLETED)
            for future in finished:
                replicate = futures[future]
                error = future.exception()
                if error is not None:
                    for other in waiting:
                        other.cancel()
                    raise error
                done[(replicate.name, replicate.seed)] = future.result()
                left = len(pending) - len(done)
                elapsed = time.perf_counter() - started
                eta = f", ETA {_duration(elapsed / len(done) * left)} for the {left} left" if left else ""
                echo(f"== trained {len(done)}/{len(pending)}: {replicate.name} seed {replicate.seed} "
                     f"{replicate.pattern}{eta}")
                echo(_result_line(replicate, done[(replicate.name, replicate.seed)]))
    return done


def _quiet(line: str) -> None:
    """A worker's echo: its divergence note reaches the parent through the summary, not the console."""


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def shared_validation(summaries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The held-out text shared by ``summaries``: ``{"val_fingerprint", "val_tokens", "same": bool}``.

    ``same`` is False when runs were scored on different text (another data seed, data or sequence length):
    their losses are then not comparable, and tables built from them say so.
    """
    prints = {(s.get("val_fingerprint"), s.get("val_tokens")) for s in summaries}
    if len(prints) == 1:
        fingerprint, tokens = next(iter(prints))
        return {"val_fingerprint": fingerprint, "val_tokens": tokens, "same": fingerprint is not None}
    return {"val_fingerprint": None, "val_tokens": None, "same": False}


__all__ = ["RESULT_FIELDS", "Replicate", "finished_summary", "parse_seeds", "plan_replicates", "run_dir",
           "run_replicates",
           "shared_validation"]
