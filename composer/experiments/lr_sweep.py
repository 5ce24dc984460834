"""A learning rate per architecture: the short sweep that runs before a seeded comparison (issue 16).

Why: with one shared learning rate, "hybrid X beats Llama" partly measures which architecture tolerates that rate
(issue 16 saw Llama spike at 3e-3 where the hybrids did not). Before its seeds train, every architecture of a
comparison (a pipeline's composite and baselines, a transfer's patterns) trains once at each rate of the sweep on
a short budget: ``fraction`` of the comparison's tokens, one seed, the same data, batch and schedule shape. The
rate with the lowest validation loss is then that architecture's rate for all its seeds.

Recipes write it in the ``train`` section, beside the settings it varies::

    train:
      tokens: 1_000_000
      lr_sweep: [1.0e-3, 2.0e-3, 3.0e-3, 6.0e-3]   # or --lr-sweep 1e-3,2e-3,3e-3,6e-3
      lr_sweep_fraction: 0.25                       # of tokens per sweep run (default 0.25)
      lr_sweep_seed: 0                              # default: the comparison's first seed

Rules, stated so a reader of the report can check them:

* the choice is the lowest final validation loss (the whole held-out split, the same text for every run); a
  rate whose run diverged (a non-finite loss stops it, ``composer.training.stability``) is never chosen;
* a tie goes to the lower rate;
* a chosen rate at either end of a sweep of several rates is flagged (``at_edge``): the best rate may lie
  outside the grid, and the report says which way to extend it;
* the sweep's runs live under ``<out>/lr-sweep/<architecture>/lr-<rate>/``; finished ones are never retrained,
  so a killed comparison resumes (``composer.experiments.replicates``).

The sweep's short budget favours rates that learn fast; it is a stated approximation (the fraction is in every
report), and ``lr_sweep_fraction: 1.0`` sweeps at the full budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.errors import ComposerRunError, ConfigError
from composer.experiments.replicates import Replicate, run_replicates
from composer.files import write_outputs
from composer.training.config import TrainConfig
from search.evaluation import best_rate

DEFAULT_FRACTION = 0.25
# keys of a recipe's train section that configure the sweep (not TrainConfig fields)
SWEEP_KEYS = ("lr_sweep", "lr_sweep_fraction", "lr_sweep_seed")


@dataclass(frozen=True)
class LRSweep:
    """The rates to try (ascending), the share of the comparison's tokens each try gets, and its seed."""

    rates: tuple[float, ...]
    fraction: float = DEFAULT_FRACTION
    seed: int | None = None  # None: the comparison's first seed

    def __post_init__(self) -> None:
        if not 0 < self.fraction <= 1:
            raise ConfigError(f"lr_sweep_fraction must be in (0, 1] (a share of train.tokens), got {self.fraction!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise ConfigError(f"lr_sweep_seed must be an integer >= 0, got {self.seed!r}")

    def tokens(self, full_tokens: int) -> int:
        return max(1, int(round(full_tokens * self.fraction)))

    def to_dict(self) -> dict[str, Any]:
        return {"rates": list(self.rates), "fraction": self.fraction, "seed": self.seed}


def parse_rates(value: Any, name: str = "lr_sweep") -> tuple[float, ...]:
    """Learning rates from a recipe list (``[1e-3, 2e-3]``) or a flag (``1e-3,2e-3``): positive, distinct,
    returned ascending. ``name`` is the setting errors name (the recipe key or the flag the user wrote)."""
    if isinstance(value, str):
        parts = [part for part in value.replace(" ", "").split(",") if part]
        try:
            value = [float(part) for part in parts]
        except ValueError:
            raise ConfigError(f"{name} must be comma-separated learning rates such as 1e-3,2e-3,3e-3, "
                              f"got {value!r}") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in value
    ):
        raise ConfigError(f"{name} must be a non-empty list of positive learning rates such as "
                          f"[1.0e-3, 2.0e-3, 3.0e-3, 6.0e-3], got {value!r}")
    rates = sorted(float(v) for v in value)
    if len(set(rates)) != len(rates):
        raise ConfigError(f"{name} has a repeated rate: {list(value)}")
    return tuple(rates)


def split_sweep(train: Mapping[str, Any]) -> tuple[dict[str, Any], LRSweep | None]:
    """A recipe's train section as (the TrainConfig fields, the sweep or None when it has no ``lr_sweep``)."""
    base = {key: value for key, value in train.items() if key not in SWEEP_KEYS}
    if train.get("lr_sweep") is None:
        stray = [key for key in SWEEP_KEYS[1:] if train.get(key) is not None]
        if stray:
            raise ConfigError(f"train.{stray[0]} is set but train.lr_sweep is not; add lr_sweep: [rates] "
                              "(or --lr-sweep) or remove it")
        return base, None
    fraction = train.get("lr_sweep_fraction")
    return base, LRSweep(parse_rates(train["lr_sweep"]),
                         DEFAULT_FRACTION if fraction is None else float(fraction), train.get("lr_sweep_seed"))


def rate_label(rate: float) -> str:
    """A rate as written in run directories and tables: ``0.002`` -> ``2e-03``, unambiguous and sortable by eye."""
    return f"{rate:.0e}" if float(f"{rate:.0e}") == rate else f"{rate:.3e}"


def sweep_dir(root: Path, name: str, rate: float) -> Path:
    return root / name / f"lr-{rate_label(rate)}"


def plan_sweep(models: Mapping[str, str], sweep: LRSweep, root: Path, base: Mapping[str, Any], preset: str,
               seed: int, run_prefix: str = "") -> list[Replicate]:
    """One short run per (architecture, rate), rate-major: a killed sweep holds every architecture's lowest
    rates first, so the choice for all of them is as far along as it can be."""
    full = int(base.get("tokens", TrainConfig.tokens))
    tokens = sweep.tokens(full)
    per_step = int(base.get("batch_size", TrainConfig.batch_size)) * int(base.get("seq_len", TrainConfig.seq_len))
    if tokens < per_step:
        raise ConfigError(f"an lr sweep run gets {tokens:,} tokens ({sweep.fraction:g} of {full:,}), less than one "
                          f"optimizer step of {per_step:,}; raise lr_sweep_fraction or tokens")
    plan = []
    for rate in sweep.rates:
        for name, pattern in models.items():
            out = sweep_dir(root, name, rate)
            config = TrainConfig(**{**base, "tokens": tokens, "lr": rate, "arch": pattern, "preset": preset,
                                    "seed": seed, "out": str(out),
                                    "run_name": f"{run_prefix}{name}-lr{rate_label(rate)}"})
            plan.append(Replicate(f"{name}@{rate_label(rate)}", pattern, seed, config))
    return plan


def choose(losses: Mapping[float, float | None]) -> tuple[float, str | None]:
    """The rate with the lowest finite loss (ties to the lower rate) and ``"lowest"``/``"highest"`` when it is
    an end of a sweep of several rates. Raises ``ComposerRunError`` when no rate gave a loss."""
    best = best_rate(losses)  # the project's one chooser: the search's evaluators choose with it too
    if best is None:
        raise ComposerRunError("every rate of the sweep diverged; add lower rates to lr_sweep")
    rates = sorted(losses)
    edge = None
    if len(rates) > 1:
        edge = "lowest" if best == rates[0] else "highest" if best == rates[-1] else None
    return best, edge


def run_sweep(models: Mapping[str, str], sweep: LRSweep, out: Path, base: Mapping[str, Any], preset: str,
              seeds: Sequence[int], run_prefix: str = "", echo: Callable[[str], None] = print,
              workers: int = 1) -> dict[str, Any]:
    """A comparison's sweep, for ``composer pipeline`` and ``composer transfer`` alike: train every unfinished
    sweep run under ``<out>/lr-sweep/`` at the sweep's seed (default: the first of the comparison's ``seeds``),
    write lr_sweep.json/.csv/.md/.png under ``out`` and return the report (see :func:`sweep_report`)."""
    seed = seeds[0] if sweep.seed is None else sweep.seed
    root = out / "lr-sweep"
    plan = plan_sweep(models, sweep, root, base, preset, seed, run_prefix)
    tokens = plan[0].config.tokens
    echo(f"== lr sweep: {len(models)} architectures x rates {', '.join(map(rate_label, sweep.rates))} = "
         f"{len(plan)} runs of {tokens:,} tokens ({sweep.fraction:g} of {base.get('tokens', TrainConfig.tokens):,}), "
         f"seed {seed}")
    summaries = run_replicates(plan, echo=echo, workers=workers)
    by_model = {name: {rate: summaries[(f"{name}@{rate_label(rate)}", seed)] for rate in sweep.rates}
                for name in models}
    report = sweep_report(by_model, sweep, tokens, seed, root)
    for name, row in report["models"].items():
        edge = f" (at the {row['at_edge']} rate of the sweep)" if row["at_edge"] else ""
        echo(f"   {name}: lr {rate_label(row['chosen_lr'])}{edge}")
    write_sweep(report, out)
    return report


def chosen_rates(report: Mapping[str, Any] | None) -> dict[str, dict[str, float]] | None:
    """Each architecture's own TrainConfig settings from a sweep (``plan_replicates``' ``per_model``)."""
    if report is None:
        return None
    return {name: {"lr": row["chosen_lr"]} for name, row in report["models"].items()}


def sweep_report(by_model: Mapping[str, Mapping[float, Mapping[str, Any]]], sweep: LRSweep, tokens: int,
                 seed: int, root: Path) -> dict[str, Any]:
    """``{"rates", "fraction", "tokens", "seed", "models": {name: {"chosen_lr", "at_edge", "points"}}}``; each
    point gives a rate's ``val_loss`` (None when diverged), ``diverged``, ``loss_spikes`` and its run."""
    models = {}
    for name, runs in by_model.items():
        points = [{"lr": rate, "val_loss": summary.get("val_loss"), "diverged": bool(summary.get("diverged")),
                   "loss_spikes": summary.get("loss_spikes", 0), "loss_largest_rise": summary.get("loss_largest_rise"),
                   "run": str(sweep_dir(root, name, rate))} for rate, summary in sorted(runs.items())]
        chosen, edge = choose({p["lr"]: p["val_loss"] for p in points})
        models[name] = {"chosen_lr": chosen, "at_edge": edge, "points": points}
    return {"rates": list(sweep.rates), "fraction": sweep.fraction, "tokens": tokens, "seed": seed, "models": models}


def sweep_notes(report: Mapping[str, Any] | None, shared_lr: float) -> list[str]:
    """What a comparison's reader must know about its learning rates."""
    if report is None:
        return [f"all architectures shared one learning rate ({shared_lr:g}); a rate that suits one can handicap "
                "another: sweep it per architecture with train.lr_sweep (or --lr-sweep)"]
    rates = ", ".join(map(rate_label, report["rates"]))
    notes = [f"learning rate per architecture: the best of {rates} by validation loss after {report['tokens']:,} "
             f"tokens ({report['fraction']:g} of the budget) at seed {report['seed']} (lr_sweep.md)"]
    edges = {name: row["at_edge"] for name, row in report["models"].items() if row["at_edge"]}
    for name, edge in edges.items():
        side = "below" if edge == "lowest" else "above"
        notes.append(f"{name}'s best rate is the {edge} of the sweep: its best may lie {side} it; extend lr_sweep")
    return notes


def format_sweep(report: Mapping[str, Any]) -> str:
    """lr_sweep.md: one row per architecture, one column per rate; the chosen rate's loss in bold."""
    rates = report["rates"]
    lines = ["| architecture | " + " | ".join(f"lr {rate_label(r)}" for r in rates) + " | chosen |",
             "|" + "---|" * (len(rates) + 2)]
    for name, row in report["models"].items():
        cells = []
        for point in row["points"]:
            if point["diverged"]:
                cell = "diverged"
            elif point["val_loss"] is None:
                cell = "n/a"
            else:
                cell = f"{point['val_loss']:.4f}" + (f" ({point['loss_spikes']} spikes)" if point["loss_spikes"] else "")
            cells.append(f"**{cell}**" if point["lr"] == row["chosen_lr"] else cell)
        edge = f" ({row['at_edge']} of the sweep)" if row["at_edge"] else ""
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {rate_label(row['chosen_lr'])}{edge} |")
    lines += ["", f"Validation loss after {report['tokens']:,} training tokens ({report['fraction']:g} of the "
                  f"comparison's budget), seed {report['seed']}; the lowest per architecture (bold) is its rate for "
                  "every seed. A diverged rate is never chosen."]
    return "\n".join(lines)


def sweep_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """lr_sweep.csv rows: one per (architecture, rate)."""
    return [{"model": name, "lr": point["lr"], "val_loss": point["val_loss"], "diverged": point["diverged"],
             "loss_spikes": point["loss_spikes"], "chosen": point["lr"] == row["chosen_lr"],
             "tokens": report["tokens"], "seed": report["seed"]}
            for name, row in report["models"].items() for point in row["points"]]


def write_sweep(report: Mapping[str, Any], out: Path) -> None:
    """lr_sweep.json/.csv/.md/.png under ``out``."""
    columns = ("model", "lr", "val_loss", "diverged", "loss_spikes", "chosen", "tokens", "seed")
    write_outputs(out, "lr_sweep", report, rows=(sweep_rows(report), columns), table=format_sweep(report),
                 plot=plot_sweep)


def plot_sweep(report: Mapping[str, Any], path: Path) -> Path:
    """Validation loss against learning rate (log axis), one line per architecture, its chosen rate ringed and
    diverged rates marked with an x at the top of the axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    finite = [p["val_loss"] for row in report["models"].values() for p in row["points"] if p["val_loss"] is not None]
    top = max(finite) if finite else 1.0
    for name, row in report["models"].items():
        points = [p for p in row["points"] if p["val_loss"] is not None]
        (line,) = ax.plot([p["lr"] for p in points], [p["val_loss"] for p in points], "o-", label=name, markersize=4)
        chosen = next((p for p in points if p["lr"] == row["chosen_lr"]), None)
        if chosen is not None:
            ax.plot([chosen["lr"]], [chosen["val_loss"]], "o", markersize=11, markerfacecolor="none",
                    color=line.get_color())
        diverged = [p["lr"] for p in row["points"] if p["diverged"]]
        if diverged:
            ax.plot(diverged, [top] * len(diverged), "x", color=line.get_color(), markersize=8)
    ax.set_xscale("log")
    ax.set_xlabel("peak learning rate")
    ax.set_ylabel("validation loss")
    ax.set_title(f"lr sweep: {report['tokens']:,} tokens, seed {report['seed']} (ring: chosen, x: diverged)",
                 fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["DEFAULT_FRACTION", "LRSweep", "SWEEP_KEYS", "choose", "chosen_rates", "format_sweep", "parse_rates", "plan_sweep",
           "rate_label", "run_sweep", "split_sweep", "sweep_dir", "sweep_notes", "sweep_report", "write_sweep"]
