"""The whole method in one job: search -> aggregate -> extrapolate -> train composite and baselines -> compare.

A pipeline recipe (recipes/pipeline/*.yaml) has one section per stage::

    out: runs/pipeline          # everything goes under here
    search: {...}               # SearchConfig fields (composer search); out is <out>/search
    aggregate: {c: 0, k: 5}     # N_c voting over the top K-means cluster (search.aggregate)
    extrapolate: {to: llama-3.2-1b, method: auto}   # or params: N (non-embedding) instead of the preset's size
    baselines: [llama, sandwich, striped-1:2]        # scaling.baselines names, matched to the composite
    train: {...}                # TrainConfig fields shared by every model (arch/preset/out are set per model)

Every stage writes its result before the next starts, so a killed pipeline re-run with the same recipe resumes:
the search resumes its Optuna study, aggregation and extrapolation are recomputed from it (cheap and
deterministic), finished trainings are kept (their summary.json), an interrupted one continues from its last
checkpoint. All models train on the same data,
tokens, batch and schedule; the comparison table (comparison.json/.csv/.md) holds validation loss, tokens/s,
parameters and KV-cache bytes per token at the target widths, and loss_curves.png plots validation loss against
tokens for every model.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.files import atomic_write_csv, atomic_write_json, atomic_write_text
from composer.training.config import TrainConfig

STAGES = ("search", "aggregate", "extrapolate", "train", "compare")
COMPOSITE = "composite"
_PER_MODEL = ("arch", "preset", "out", "run_name")  # set by the pipeline for each model


@dataclass
class PipelineConfig:
    out: str = "runs/pipeline"
    search: dict[str, Any] = field(default_factory=dict)
    aggregate: dict[str, Any] = field(default_factory=lambda: {"c": 0, "k": 5})
    extrapolate: dict[str, Any] = field(default_factory=lambda: {"to": "llama-3.2-1b", "method": "auto"})
    baselines: list[str] = field(default_factory=lambda: ["llama", "sandwich", "striped-1:2"])
    train: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        from search.config import SearchConfig

        for section in ("search", "aggregate", "extrapolate", "train"):
            if not isinstance(getattr(self, section), dict):
                raise ConfigError(f"pipeline section {section!r} must be a mapping of option: value")
        _check_keys("search", self.search, [f for f in SearchConfig.field_names() if f != "out"])
        _check_keys("aggregate", self.aggregate, ["c", "k"])
        _check_keys("extrapolate", self.extrapolate, ["to", "method", "params", "rounding"])
        _check_keys("train", self.train, [f for f in TrainConfig.field_names() if f not in _PER_MODEL])
        if "to" not in self.extrapolate:
            raise ConfigError("pipeline section 'extrapolate' needs 'to': the target preset (e.g. llama-3.2-1b)")
        if isinstance(self.baselines, str):
            self.baselines = [self.baselines]

    @classmethod
    def from_recipe(cls, path: str | Path, **overrides: Any) -> PipelineConfig:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"recipe {str(path)!r} does not exist; pass the path of a YAML file (recipes/pipeline/)")
        try:
            values = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"recipe {str(path)!r} is not valid YAML: {str(err).splitlines()[0]}") from err
        if not isinstance(values, dict):
            raise ConfigError(f"recipe {str(path)!r} must be a mapping of section: options")
        _check_keys(f"recipe {str(path)!r}", values, [f.name for f in dataclasses.fields(cls)])
        for key, value in overrides.items():
            if value is None:
                continue
            section, _, option = key.partition(".")
            if option:  # "search.trials" -> values["search"]["trials"]
                values.setdefault(section, {})[option] = value
            else:
                values[key] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_keys(where: str, values: dict, allowed: list[str]) -> None:
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ConfigError(f"{where} has unknown option(s) {unknown}; valid: {', '.join(allowed)}")


def _read_json(path: Path) -> Any | None:
    return json.loads(path.read_text()) if path.is_file() else None


class Pipeline:
    """Runs the stages of a :class:`PipelineConfig` in order; each stage's result is a file under ``out``."""

    def __init__(self, config: PipelineConfig, echo: Callable[[str], None] = print) -> None:
        self.config = config
        self.out = Path(config.out)
        self.echo = echo

    # -- stages -------------------------------------------------------------------------------------------
    def run_search(self) -> dict[str, Any]:
        from search.config import SearchConfig
        from search.run import run_search

        search_config = SearchConfig(**{"seed": self.config.seed, **self.config.search, "out": str(self.out / "search")})
        self.echo(f"== search: {search_config.trials} trials ({search_config.evaluator}/{search_config.budget})")
        result = run_search(search_config, echo=self.echo)  # resumes its study when re-run
        return {"study": result["study"], "storage": result["storage"], "best": result["best"]["pattern"]}

    def run_aggregate(self) -> dict[str, Any]:
        from search.aggregate import aggregate

        # Always recomputed (it reads the study in well under a second): a search resumed with more trials must
        # not be aggregated from the previous run's file.
        path = self.out / "aggregate.json"
        result = aggregate(self.out / "search", **self.config.aggregate).to_dict()
        self.echo(f"== aggregate: {result['pattern']} from {len(result['members'])} member(s) of the top cluster "
                  f"(N_{result['c']}, k={result['k']}; best single trial {result['best']['pattern']})")
        atomic_write_json(path, result)
        return result

    def run_extrapolate(self, pattern: str) -> dict[str, Any]:
        from scaling.baselines import matched_baselines
        from scaling.extrapolate import extrapolate

        path = self.out / "extrapolate.json"
        done = _read_json(path)
        if done is not None and done["source_pattern"] == pattern:
            return done
        options = self.config.extrapolate
        result = extrapolate(pattern, options["to"], method=options.get("method", "auto"),
                             target_params=options.get("params"), rounding=options.get("rounding", "ceil"))
        baselines = matched_baselines(result.arch, tuple(self.config.baselines), seed=self.config.seed)
        data = {**result.to_dict(), "baselines": {name: arch.pattern for name, arch in baselines.items()}}
        self.echo(f"== extrapolate: {pattern} -> {result.compact} ({result.method}, {result.n_layers} layers, "
                  f"{result.non_embedding_params:,} non-embedding params at {options['to']} widths)")
        atomic_write_json(path, data)
        return data

    def models(self, extrapolation: dict[str, Any]) -> dict[str, str]:
        """Name -> pattern of every model to train: the composite first, then its baselines."""
        models = {COMPOSITE: extrapolation["pattern"]}
        for name, pattern in extrapolation["baselines"].items():
            if pattern in models.values():  # e.g. the composite already is the 1:1 alternation
                self.echo(f"   {name} is the same pattern as {next(k for k, v in models.items() if v == pattern)}; "
                          "trained once")
                continue
            models[name] = pattern
        return models

    def train_config(self, name: str, pattern: str) -> TrainConfig:
        return TrainConfig(**{"seed": self.config.seed, **self.config.train, "arch": pattern,
                              "preset": self.config.extrapolate["to"], "out": str(self.out / "train" / name),
                              "run_name": f"{self.out.name}-{name}"})

    def run_train(self, models: dict[str, str]) -> dict[str, dict[str, Any]]:
        from composer.training.run import train

        summaries = {}
        for i, (name, pattern) in enumerate(models.items(), 1):
            config = self.train_config(name, pattern)
            run_dir = Path(config.out)
            summary = _read_json(run_dir / "summary.json")
            if summary is None or summary.get("pattern") != pattern:
                resume = (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").glob("*.ckpt"))
                self.echo(f"== train {i}/{len(models)}: {name} {pattern} ({config.tokens:,} tokens"
                          f"{', resuming' if resume else ''})")
                summary = train(config, resume=resume)
            else:
                self.echo(f"== train {i}/{len(models)}: {name} done (val_loss {summary['val_loss']:.4f})")
            summaries[name] = summary
        return summaries

    def compare(self, models: dict[str, str], summaries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        from composer.presets import get_preset

        target = get_preset(self.config.extrapolate["to"]).arch
        rows = []
        for name, pattern in models.items():
            summary = summaries[name]
            stats = analyze(target.with_pattern(pattern))
            rows.append({
                "model": name,
                "pattern": stats.compact,
                "layers": stats.n_layers,
                "counts": stats.counts,
                "val_loss": summary["val_loss"],
                "tokens": summary["tokens"],
                "tokens_per_s": summary["tokens_per_s"],
                "params": summary["params"],
                "non_embedding_params": summary["non_embedding_params"],
                "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
                "run": str(self.out / "train" / name),
            })
        composite = rows[0]
        for row in rows:
            row["val_loss_vs_composite"] = row["val_loss"] - composite["val_loss"]
            row["tokens_per_s_ratio"] = row["tokens_per_s"] / composite["tokens_per_s"]
        write_comparison(rows, self.out)
        plot_loss_curves({name: self.out / "train" / name for name in models}, self.out / "loss_curves.png")
        return rows

    # -- all ----------------------------------------------------------------------------------------------
    def run(self, stages: tuple[str, ...] = STAGES) -> dict[str, Any]:
        unknown = sorted(set(stages) - set(STAGES))
        if unknown:
            raise ConfigError(f"unknown stage(s) {unknown}; choose from {', '.join(STAGES)}")
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.out / "pipeline.json", self.config.to_dict())
        result: dict[str, Any] = {"out": str(self.out)}
        if "search" in stages:
            result["search"] = self.run_search()
        aggregation = self.run_aggregate() if "aggregate" in stages else _require(self.out / "aggregate.json")
        result["aggregate"] = {"pattern": aggregation["pattern"], "members": aggregation["members"]}
        if "extrapolate" not in stages and not (self.out / "extrapolate.json").is_file():
            raise ConfigError(f"no {self.out / 'extrapolate.json'}; run the extrapolate stage first")
        extrapolation = self.run_extrapolate(aggregation["pattern"])
        result["extrapolate"] = {k: extrapolation[k] for k in ("pattern", "method", "counts", "baselines")}
        models = self.models(extrapolation)
        if "train" in stages or "compare" in stages:
            summaries = self.run_train(models) if "train" in stages else {
                name: _require(self.out / "train" / name / "summary.json") for name in models}
            if "compare" in stages:
                result["comparison"] = self.compare(models, summaries)
        return result


def _require(path: Path) -> Any:
    data = _read_json(path)
    if data is None:
        raise ConfigError(f"{path} does not exist; run the stage that writes it first")
    return data


COLUMNS = ("model", "pattern", "layers", "val_loss", "val_loss_vs_composite", "tokens_per_s", "tokens_per_s_ratio",
           "params", "non_embedding_params", "kv_cache_bytes_per_token")


def format_comparison(rows: list[dict[str, Any]]) -> str:
    """A Markdown table, best validation loss marked."""
    best = min(row["val_loss"] for row in rows)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [
            row["model"], f"`{row['pattern']}`", str(row["layers"]),
            f"{row['val_loss']:.4f}{' *' if row['val_loss'] == best else ''}",
            f"{row['val_loss_vs_composite']:+.4f}", f"{row['tokens_per_s']:,.0f}", f"{row['tokens_per_s_ratio']:.2f}",
            f"{row['params']:,}", f"{row['non_embedding_params']:,}", f"{row['kv_cache_bytes_per_token']:,}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_comparison(rows: list[dict[str, Any]], out: Path) -> None:
    atomic_write_json(out / "comparison.json", rows)
    atomic_write_csv(out / "comparison.csv", rows, COLUMNS)
    atomic_write_text(out / "comparison.md", format_comparison(rows) + "\n")


def read_loss_curve(run_dir: Path, column: str = "val/loss") -> list[tuple[float, float]]:
    """(tokens seen, loss) points from the run's CSV logs (all versions, so a resumed run's curve is whole)."""
    summary = _read_json(run_dir / "summary.json") or {}
    tokens_per_step = summary.get("tokens", 0) / max(1, summary.get("steps", 1))
    points: dict[int, float] = {}
    for metrics in sorted((run_dir / "logs").glob("version_*/metrics.csv")):
        with open(metrics, newline="") as f:
            for row in csv.DictReader(f):
                if row.get(column) and row.get("step"):
                    points[int(row["step"])] = float(row[column])
    return [(step * tokens_per_step, loss) for step, loss in sorted(points.items())]


def plot_loss_curves(runs: dict[str, Path], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_val, ax_train) = plt.subplots(1, 2, figsize=(11, 4))
    for name, run_dir in runs.items():
        style = {"linewidth": 2.2 if name == COMPOSITE else 1.3, "marker": "o", "markersize": 3}
        for ax, column in ((ax_val, "val/loss"), (ax_train, "train/loss")):
            points = read_loss_curve(run_dir, column)
            if points:
                ax.plot([t for t, _ in points], [loss for _, loss in points], label=name, **style)
    for ax, title in ((ax_val, "validation loss"), (ax_train, "training loss")):
        ax.set_xlabel("tokens")
        ax.set_ylabel("loss")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
