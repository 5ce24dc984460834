"""A pipeline's recipe, checked: its stages, source (a search to run, or a finished one), growth, models,
seeds and training (``composer pipeline --recipe``)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.experiments import pipeline_recall
from composer.experiments.lr_sweep import SWEEP_KEYS, split_sweep
from composer.experiments.replicates import (
    parse_seeds,
)
from composer.training.config import TrainConfig, apply_overrides, check_types, load_recipe, renamed_notice

STAGES = ("search", "aggregate", "extrapolate", "train", "eval", "compare")
EVAL_OPTIONS = ("tasks", "limit", "include_path", "num_fewshot", "batch_size", "device")
COMPOSITE = "composite"
REFERENCE = "llama"  # the paired differences are to the matched Llama when it is trained
CONFIDENCE = 0.95
_PER_MODEL = ("arch", "preset", "out", "run_name", "seed")  # set by the pipeline for each run


@dataclass
class PipelineConfig:
    out: str = "runs/pipeline"
    search: dict[str, Any] = field(default_factory=dict)
    # N_c voting over the search's top cluster; None: {"c": 0, "k": 5}, or nothing beside from_search
    aggregate: dict[str, Any] | None = None
    extrapolate: dict[str, Any] = field(default_factory=lambda: {"target": "llama-3.2-1b", "method": "auto"})
    baselines: list[str] = field(default_factory=lambda: ["llama", "sandwich", "striped-1:2"])
    train: dict[str, Any] = field(default_factory=dict)
    seed: int = 0  # the search's seed (and the random baseline's)
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])  # every model trains once per seed
    eval: dict[str, Any] = field(default_factory=dict)  # lm-eval tasks for every trained model; {} = no eval
    # a finished composer search's --out: train its answer instead of running search and aggregate (issue 49)
    from_search: str | None = None

    def __post_init__(self) -> None:
        from search.config import SearchConfig

        if self.eval is None:
            self.eval = {}
        self._check_source()
        for section in ("search", "aggregate", "extrapolate", "train", "eval"):
            if not isinstance(getattr(self, section), dict):
                raise ConfigError(f"pipeline section {section!r} must be a mapping of option: value")
        _check_keys("search", self.search, [f for f in SearchConfig.field_names() if f != "out"])
        _check_keys("aggregate", self.aggregate, ["c", "k"])
        if "to" in self.extrapolate:
            self.extrapolate = renamed_key(self.extrapolate, "extrapolate", "to", "target")
        _check_keys("extrapolate", self.extrapolate, ["target", "method", "params", "rounding", "attention"])
        _check_keys("train", self.train, [f for f in TrainConfig.field_names() if f not in _PER_MODEL]
                    + list(SWEEP_KEYS) + [pipeline_recall.SETTING])
        _check_keys("eval", self.eval, list(EVAL_OPTIONS))
        for section, fields_of in (("search", SearchConfig), ("train", TrainConfig)):
            check_types(getattr(self, section), fields_of, f"pipeline section {section!r}: ")
        self.eval = _eval_options(self.eval)
        if "target" not in self.extrapolate:
            raise ConfigError("pipeline section 'extrapolate' needs 'target': the target preset (e.g. llama-3.2-1b)")
        from scaling.extrapolate import ATTENTION_RULES

        if self.extrapolate.get("attention") not in (None, *ATTENTION_RULES):
            raise ConfigError(f"extrapolate.attention must be one of {', '.join(ATTENTION_RULES)}, got "
                              f"{self.extrapolate['attention']!r}")
        if isinstance(self.baselines, str):
            self.baselines = [self.baselines]
        self.seeds = parse_seeds(self.seeds)
        train = dict(self.train)
        # held-out sequences each trained model's recall is measured on (composer.experiments.pipeline_recall)
        self.recall_sequences = pipeline_recall.check_sequences(
            train.pop(pipeline_recall.SETTING, pipeline_recall.DEFAULT_SEQUENCES))
        self.base_train, self.lr_sweep = split_sweep(train)
        # the recipe's own rate overrides the search's; TrainConfig's default does not (composer.experiments.search_rates)
        self.explicit_lr = self.base_train.get("lr") is not None

    def _check_source(self) -> None:
        """Where the composite comes from: a search this pipeline runs (``search``, then ``aggregate``) or a
        finished one (``from_search``), never both."""
        if self.from_search is None:
            self.aggregate = {"c": 0, "k": 5} if self.aggregate is None else self.aggregate
            return
        if not isinstance(self.from_search, str | Path) or not str(self.from_search).strip():
            raise ConfigError(f"from_search must be the --out directory of a finished composer search, got "
                              f"{self.from_search!r}")
        self.from_search = str(self.from_search)
        if self.search:
            raise ConfigError("give the pipeline a search section (a search it runs under out; --trials and "
                              "--budget set it) or from_search (a finished search's answer), not both: drop one")
        if self.aggregate is not None:
            raise ConfigError("from_search trains the search's answer, so nothing is voted: drop the aggregate "
                              "section (it votes over a search the pipeline runs itself)")
        self.aggregate = {}

    @classmethod
    def from_recipe(cls, path: str | Path, **overrides: Any) -> PipelineConfig:
        """A recipe's values with ``overrides`` on top. A ``from_search`` override (``--from-search``) replaces the
        recipe's source: its search and aggregate sections, and a from_search of its own."""
        values = load_recipe(path, [f.name for f in dataclasses.fields(cls)])
        if overrides.get("from_search") is not None:
            values.pop("search", None)
            values.pop("aggregate", None)
        return cls(**apply_overrides(values, overrides))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def renamed_key(section: dict[str, Any], where: str, old: str, new: str) -> dict[str, Any]:
    """``section`` with its ``old`` key under ``new`` (a recipe written before a rename), saying so once; a section
    holding both, or a ``new`` set by a flag (``apply_overrides``), keeps ``new``."""
    section = dict(section)
    value = section.pop(old)
    renamed_notice(f"{where}.{old}", f"{where}.{new}")
    section.setdefault(new, value)
    return section


def _check_keys(where: str, values: dict, allowed: list[str]) -> None:
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ConfigError(f"{where} has unknown option(s) {unknown}; valid: {', '.join(allowed)}")


def _eval_options(options: dict[str, Any]) -> dict[str, Any]:
    """The ``eval`` section checked and normalised: ``tasks`` a non-empty list of names (a comma-separated
    string is accepted), ``limit`` positive; ``{}`` (no section) means no eval stage."""
    if not options:
        return {}
    options = dict(options)
    tasks = options.get("tasks")
    if isinstance(tasks, str):
        tasks = [t.strip() for t in tasks.split(",")]
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) and t.strip() for t in tasks):
        raise ConfigError("pipeline section 'eval' needs 'tasks': a list of lm-eval task names "
                          "(e.g. [arc_easy])")
    options["tasks"] = [t.strip() for t in tasks]
    limit = options.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise ConfigError(f"eval.limit must be a positive number of documents per task, got {limit!r}")
    return options


def read_json(path: Path) -> Any | None:
    """A stage's result file, or None where it has not been written."""
    return json.loads(path.read_text()) if path.is_file() else None
