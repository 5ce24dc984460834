"""The whole method in one job: search -> aggregate -> extrapolate -> train composite and baselines -> compare.

A pipeline recipe (recipes/pipeline/*.yaml) has one section per stage::

    out: runs/pipeline          # everything goes under here
    search: {...}               # SearchConfig fields (composer search); out is <out>/search
    aggregate: {c: 0, k: 5}     # N_c voting over the top K-means cluster (search.aggregate)
    # or, instead of search and aggregate: from_search: runs/search (a finished search's answer, below)
    extrapolate: {target: llama-3.2-1b, method: auto}   # or params: N (non-embedding) instead of the preset's
                                                     # size; attention: keep|repeat (default: the search's rule)
    baselines: [llama, sandwich, striped-1:2]        # scaling.matching names, matched to the composite
    train: {...}                # TrainConfig fields shared by every model (arch/preset/out/seed set per run)
                                # plus lr_sweep: [rates] for a learning rate per model (composer.experiments.lr_sweep)
                                # and recall_sequences: N (each trained model's recall; 32, 0: not measured)
    seeds: [0, 1, 2]            # every model trains once per seed (--seeds 0,1,2)
    eval: {tasks: [arc_easy, hellaswag], limit: 500}   # optional: lm-eval tasks for every trained model

From a finished search (``from_search: DIR``, ``composer pipeline --from-search DIR``; issue 49): no search runs
and nothing is voted. The composite is the search's answer, best.json's ``recommended`` pattern
(``search.results.answer_of``), the one ``composer train --from-search`` and ``composer extrapolate --from-search``
take; it grows to the target by the search's own ``--attention-at-target`` (read from DIR's config.json) and
starts at the rate the search chose for it, its baselines at the rates the search chose for their layouts where
its final leaderboard holds them. So the model trained is the one the search scored and costed, without copying
its pattern into an aggregate.json by hand. The answer is read again on every run (a few JSON files) and recorded
in aggregate.json with ``from_search``. A recipe gives ``search`` or ``from_search``, not both; ``aggregate`` votes
over a search this pipeline runs, so it is refused beside ``from_search``; the ``--from-search`` flag replaces a
recipe's ``search`` and ``aggregate`` sections.

The target preset was ``extrapolate.to`` before issue 49 ("one name, one meaning": ``--target`` on every command);
the old key is still read, with a one-line notice.

Every stage writes its result before the next starts, so a killed pipeline re-run with the same recipe resumes:
the search resumes its Optuna study, aggregation and extrapolation are recomputed from it (cheap and
deterministic), finished (model, seed) trainings are kept (their summary.json), an interrupted one continues
from its last checkpoint.

All models train on the same data, tokens, batch and schedule, once per seed, and are scored on the same
held-out text (the validation split follows the data, not the seed; summary.json's val_fingerprint proves it).
The comparison (comparison.json/.csv/.md) gives per model the mean, std and a Student-t 95% interval of the
validation loss over seeds, and the paired per-seed difference to the matched Llama with its interval and a
verdict in words ("lower", "higher", "within noise"); plus tokens/s, parameters and KV-cache bytes per token at
the target widths. loss_curves.png plots each model's mean curve over seeds with the seeds' range as a band.

How the winner's attention grows to the target (``extrapolate.attention``, ``composer pipeline --attention``):
``repeat`` stacks its attention layers with the rest, ``keep`` keeps their number (``scaling.extrapolate``). Left
out, it is the rule the search scored and costed its candidates by: the ``attention_at_target`` of the search's
``config.json`` in ``from_search`` or under ``<out>/search`` (what the search ran with), else of the recipe's
``search`` section, else ``repeat``. The pattern grows by ``search.growth.grow``, the rule every command grows a
search's answer by: a published family the search entered (best.json's ``known_layouts``) in its own layout at the
target, as the search trained it; Llama's and the paper's layouts stacked, whatever the rule.
extrapolate.json records the rule (``attention``) and where it came from (``attention_from``).

Learning rates (``composer.experiments.search_rates``), strongest rule first: with ``train.lr_sweep`` every model first trains
at each rate on a short budget (one seed) and uses its best rate for all its seeds (``composer.experiments.lr_sweep``;
``lr_sweep.json/.csv/.md/.png``); an explicit ``train.lr`` is shared by every model; otherwise, when the search
recorded a rate per trial (its ``lm`` and ``recall`` evaluators), the composite starts at the rate the search chose
for the composite's own pattern if the search scored it, else for the best member of the aggregation's top
cluster, and a depth-matched baseline (llama, striped-1:R, a published family) at the rate of its layout at the
search depth when the search scored that layout (so the composite's tuned start is not set against a baseline at
an untuned default); every other model shares the default rate. A search rate was found at the search's widths:
a starting point, not a rate tuned at the target, and the notes say so. comparison.json gives per model
``chosen_lr``, ``lr_source`` (``search``, ``sweep`` or ``shared``), ``search_lr`` and ``search_lr_pattern``.

Power: ``comparison.json``'s ``power`` gives the seed spread within each model against the spread between them
and the seeds' rank agreement (``composer.evidence.seed_separation``). When that says the budget cannot decide,
or the composite's interval against Llama contains 0, the ``conclusion`` reads "underpowered: raise --tokens or
--seeds" instead of naming a winner, and no row is starred as best.

Recall (issue 48): after each (model, seed) training the trained model's recall is measured as ``composer eval
--tasks recall`` measures it, on ``train.recall_sequences`` held-out sequences (``--recall-sequences``; default
32, 0: none), and kept in its run's ``recall.json``, so a resumed pipeline measures only the runs without one
(``composer.experiments.pipeline_recall``). The comparison gives per model the random copy gain at the longest
distance and the AR slice's contrasts, each sequence averaged over the seeds and the t interval over the sequences,
and says plainly when no model retrieves, so that small gains do not read as a ranking.

The optional ``eval`` stage (a recipe with an ``eval`` section: ``tasks``, and ``limit``, ``include_path``,
``num_fewshot``, ``batch_size``, ``device``) scores every trained model, each model at each seed, on
lm-evaluation-harness tasks (composer/evaluation/downstream.py; ``pip install 'composer-hnas[eval]'``) into its run's
``eval.json``, kept on a re-run with the same options. The comparison then gives each task metric's mean over
seeds with its interval, per model, and comparison.md a second table of them.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.accounting import analyze, format_bytes
from composer.errors import ConfigError
from composer.evidence import (
    UNDERPOWERED,
    VERDICT_HIGHER,
    VERDICT_LOWER,
    format_interval,
    paired_difference,
    seed_separation,
    seed_summary,
)
from composer.experiments import pipeline_recall
from composer.experiments.lr_sweep import SWEEP_KEYS, run_sweep, split_sweep
from composer.experiments.replicates import (
    Replicate,
    finished_summary,
    parse_seeds,
    plan_replicates,
    run_dir,
    run_replicates,
    shared_validation,
)
from composer.experiments.search_rates import (
    SearchRate,
    StartingRate,
    lookup,
    per_model,
    rate_notes,
    starting_rates,
)
from composer.files import atomic_write_csv, atomic_write_json, atomic_write_text
from composer.training.config import TrainConfig, apply_overrides, load_recipe, renamed_notice
from search.tradeoffs import CACHE_LENGTH  # the serving length the search's --max-kv and its front read: 32K

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


def _read_json(path: Path) -> Any | None:
    return json.loads(path.read_text()) if path.is_file() else None


class Pipeline:
    """Runs the stages of a :class:`PipelineConfig` in order; each stage's result is a file under ``out``."""

    def __init__(self, config: PipelineConfig, echo: Callable[[str], None] = print) -> None:
        self.config = config
        self.out = Path(config.out)
        self.echo = echo
        self._task_manager: Any = None  # lm-eval's task index, built on first use by the eval stage
        self._sweep: dict[str, Any] | None = None  # lr_sweep.json of this run's train stage
        self._search_rates: dict[str, SearchRate | None] = {}  # model -> its search rate (set by use_search_rates)
        # the search whose rule and rates the pipeline reads: a finished one (from_search), else its own
        self.search_dir = Path(config.from_search) if config.from_search else self.out / "search"

    # -- stages -------------------------------------------------------------------------------------------
    def run_search(self) -> dict[str, Any]:
        from search.config import SearchConfig
        from search.run import run_search

        if self.config.from_search:  # finished: the aggregate stage reads its answer
            return {"from_search": str(self.search_dir)}
        search_config = SearchConfig(**{"seed": self.config.seed, **self.config.search, "out": str(self.out / "search")})
        self.echo(f"== search: {search_config.trials} trials ({search_config.evaluator}/{search_config.budget})")
        result = run_search(search_config, echo=self.echo)  # resumes its study when re-run
        return {"study": result["study"], "storage": result["storage"], "best": result["best"]["pattern"]}

    def run_aggregate(self) -> dict[str, Any]:
        from search.aggregate import aggregate

        if self.config.from_search:
            return self.read_answer()
        # Always recomputed (it reads the study in well under a second): a search resumed with more trials must
        # not be aggregated from the previous run's file.
        path = self.out / "aggregate.json"
        result = aggregate(self.out / "search", **self.config.aggregate).to_dict()
        self.echo(f"== aggregate: {result['pattern']} from {len(result['members'])} member(s) of the top cluster "
                  f"(N_{result['c']}, k={result['k']}; best single trial {result['best']['pattern']})")
        atomic_write_json(path, result)
        return result

    def read_answer(self) -> dict[str, Any]:
        """aggregate.json for a finished search (``from_search``): its answer as the composite, with the rates its
        final leaderboard chose (the answer's own first), read again on every run (a few small files)."""
        from search.results import answer_of

        answer = answer_of(self.search_dir)
        leaderboard = _read_json(self.search_dir / "leaderboard.json") or []
        rates = {row["pattern"]: row["lr"] for row in leaderboard if row.get("pattern") and row.get("lr") is not None}
        if answer["lr"] is not None:
            rates[answer["pattern"]] = answer["lr"]
        known = f" ({answer['known']})" if answer["known"] else ""
        rate = f"; rate {answer['lr']:g} chosen at {answer['lr_at'] or 'its last rung'}" if answer["lr"] else ""
        self.echo(f"== answer: {answer['pattern']}{known}, the search's {answer['answer'] or 'best'} answer "
                  f"({self.search_dir / 'best.json'}){rate}")
        result = {"pattern": answer["pattern"], "members": [], "rates": rates, "lr": answer["lr"],
                  "from_search": {key: answer[key] for key in ("out", "answer", "verdict", "known", "lr", "lr_at",
                                                               "attention_at_target", "evaluator", "study")}}
        atomic_write_json(self.out / "aggregate.json", result)
        return result

    def run_extrapolate(self, pattern: str) -> dict[str, Any]:
        from scaling.matching import matched_baselines
        from search.growth import grow
        from search.results import known_in_search

        path = self.out / "extrapolate.json"
        attention, source = self.attention_rule(pattern)
        known = known_in_search(pattern, self.search_dir)
        done = _read_json(path)
        options = self.config.extrapolate
        # extrapolate.json files written before issue 47 grew every pattern with its attention repeated
        if (done is not None and done["source_pattern"] == pattern and done.get("attention", "repeat") == attention
                and done.get("target") == options["target"] and done.get("known") == known):
            return done
        # the one rule every command grows a search's answer by: a family the search entered in its own layout
        grown = grow(pattern, options["target"], known, attention, target_params=options.get("params"),
                     method=options.get("method", "auto"), rounding=options.get("rounding", "ceil"))
        result = grown.extrapolation
        baselines = matched_baselines(result.arch, tuple(self.config.baselines), seed=self.config.seed)
        data = {**result.to_dict(), "attention_from": source, "known": known, "how": grown.how,
                "baselines": {name: arch.pattern for name, arch in baselines.items()}}
        self.echo(f"== extrapolate: {pattern} -> {result.compact} ({result.method}, {result.n_layers} layers, "
                  f"{result.non_embedding_params:,} non-embedding params at {options['target']} widths; attention "
                  f"{'kept' if attention == 'keep' else 'repeated'}: {source})")
        atomic_write_json(path, data)
        return data

    def attention_rule(self, pattern: str) -> tuple[str, str]:
        """How ``pattern``'s attention grows to the target (``repeat`` or ``keep``), and why: the recipe's
        ``extrapolate.attention``, else the search's rule (the module docstring)."""
        explicit = self.config.extrapolate.get("attention")
        if explicit is not None:
            return explicit, "extrapolate.attention"
        from search.aggregate import refuse_depth_search, search_attention

        refuse_depth_search(self.search_dir, "composer pipeline")
        rule, config_json = search_attention(self.search_dir)
        if rule is not None:  # what the search ran with
            source = f"the search's --attention-at-target {rule} ({config_json})"
        elif "attention_at_target" in self.config.search:
            rule = self.config.search["attention_at_target"]
            source = f"the search section's attention_at_target: {rule}"
        else:
            return "repeat", "the default: no search rule in the recipe or under --out"
        return rule, source

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

    def use_search_rates(self, aggregation: dict[str, Any], models: dict[str, str]) -> None:
        """Find each model's search rate in ``aggregation`` (aggregate.json): the composite's own pattern's, else
        the best rated member's of the top cluster; a depth-matched baseline's layout's at the search depth.
        Models the search has no rate for (and aggregate.json files written before issue 25) get None."""
        from composer.pattern import layers as layer_tokens
        from scaling.matching import layout_at_depth

        rates = aggregation.get("rates") or {}
        depth = len(layer_tokens(aggregation["pattern"]))
        found = {COMPOSITE: lookup(rates, aggregation["pattern"], *(m["pattern"] for m in aggregation["members"]))}
        for name in models:
            if name != COMPOSITE:
                found[name] = lookup(rates, layout_at_depth(name, depth))
        self._search_rates = found

    def starting_rates(self, models: dict[str, str]) -> dict[str, StartingRate]:
        """Every model's rate and its source, by ``composer.experiments.search_rates``' precedence."""
        return starting_rates({name: self._search_rates.get(name) for name in models},
                              TrainConfig(**self.config.base_train).lr, explicit_lr=self.config.explicit_lr,
                              sweep=self.sweep_result(models))

    def plan(self, models: dict[str, str]) -> list[Replicate]:
        """Every (model, seed) training, seed-major, under ``<out>/train/<model>/seed-<s>``, each model at its
        starting rate (:meth:`starting_rates`)."""
        return plan_replicates(models, self.config.seeds, self.out / "train", self.config.base_train,
                               self.config.extrapolate["target"], run_prefix=f"{self.out.name}-",
                               per_model=per_model(self.starting_rates(models)))

    def run_sweep(self, models: dict[str, str]) -> dict[str, Any] | None:
        """The learning-rate sweep (``train.lr_sweep``) of every model; finished points are kept."""
        if self.config.lr_sweep is None:
            return None
        self._sweep = run_sweep(models, self.config.lr_sweep, self.out, self.config.base_train,
                                self.config.extrapolate["target"], self.config.seeds, run_prefix=f"{self.out.name}-",
                                echo=self.echo)
        return self._sweep

    def sweep_result(self, models: dict[str, str]) -> dict[str, Any] | None:
        """This run's sweep, or the lr_sweep.json an earlier train stage wrote (``--stages compare``)."""
        if self.config.lr_sweep is None:
            return None
        if self._sweep is None:
            done = _read_json(self.out / "lr_sweep.json")
            if done is None or set(done["models"]) != set(models) or done["rates"] != list(self.config.lr_sweep.rates):
                raise ConfigError(f"{self.out / 'lr_sweep.json'} is missing or from another sweep; run the train "
                                  "stage first")
            self._sweep = done
        return self._sweep

    def run_train(self, models: dict[str, str]) -> dict[tuple[str, int], dict[str, Any]]:
        self.run_sweep(models)
        plan = self.plan(models)
        seeds = ", ".join(map(str, self.config.seeds))
        self.echo(f"== train: {len(models)} models x seeds {seeds} = {len(plan)} runs")
        self.echo("   learning rates: " + ", ".join(f"{name} {rate.lr:g} ({rate.source})"
                                                    for name, rate in self.starting_rates(models).items()))
        measure = (pipeline_recall.RecallMeasurer(self.config.recall_sequences, self.echo)
                   if self.config.recall_sequences else None)
        return run_replicates(plan, echo=self.echo, after=measure)

    def finished(self, models: dict[str, str]) -> dict[tuple[str, int], dict[str, Any]]:
        """Summaries of a train stage that ran earlier (``--stages compare``); every run must have finished. A run
        without a current recall record is measured now, as the train stage would have measured it."""
        summaries = {}
        plan = self.plan(models)
        for replicate in plan:
            summary = finished_summary(replicate)
            if summary is None:
                raise ConfigError(f"{replicate.out / 'summary.json'} does not exist; run the train stage first")
            summaries[(replicate.name, replicate.seed)] = summary
        if self.config.recall_sequences:  # a run trained before recall was recorded, or killed before measuring
            measure = pipeline_recall.RecallMeasurer(self.config.recall_sequences, self.echo)
            for replicate in plan:
                measure(replicate, summaries[(replicate.name, replicate.seed)])
        return summaries

    def eval_identity(self) -> dict[str, Any]:
        """What makes two evaluations the same: an eval.json with other values is redone."""
        options = self.config.eval
        include = options.get("include_path")
        include = [str(p) for p in ([include] if isinstance(include, (str, Path)) else include or [])] or None
        return {"tasks": list(options["tasks"]), "limit": options.get("limit"), "include_path": include,
                "num_fewshot": options.get("num_fewshot")}

    def task_manager(self) -> Any:
        """lm-eval's task index for the eval section, built once (indexing takes seconds)."""
        if self._task_manager is None:
            from composer.evaluation.downstream import task_manager

            self._task_manager = task_manager(self.config.eval.get("include_path"), self.config.eval["tasks"])
        return self._task_manager

    def run_eval(self, models: dict[str, str]) -> dict[tuple[str, int], dict[str, Any]]:
        """Every trained model (each model, each seed) on the recipe's lm-eval tasks, into
        ``<run>/eval.json``; a run whose eval.json was made with the same options is kept."""
        from composer.evaluation.downstream import evaluate

        options, identity = self.config.eval, self.eval_identity()
        plan = self.plan(models)
        self.echo(f"== eval: {', '.join(options['tasks'])} on {len(plan)} trained models"
                  + (f" (limit {options['limit']} per task)" if options.get("limit") else ""))
        reports = {}
        for replicate in plan:
            path = replicate.out / "eval.json"
            done = _read_json(path)
            if done is not None and done.get("pipeline_eval") == identity:
                reports[(replicate.name, replicate.seed)] = done
                continue
            report = evaluate(
                replicate.out / "model", options["tasks"], include_path=options.get("include_path"),
                limit=options.get("limit"), num_fewshot=options.get("num_fewshot"),
                batch_size=options.get("batch_size", 8), device=options.get("device", "cpu"),
                manager=self.task_manager(),
            )
            report["pipeline_eval"] = identity
            atomic_write_json(path, report)
            summary = ", ".join(f"{task} {metric} {value:.4f}" for task, metric, value in headline(report))
            self.echo(f"   {replicate.name} seed {replicate.seed}: {summary}")
            reports[(replicate.name, replicate.seed)] = report
        return reports

    def evaluations(self, models: dict[str, str]) -> dict[tuple[str, int], dict[str, Any]]:
        """The eval.json of every run, written by an earlier eval stage with the recipe's options."""
        identity, reports = self.eval_identity(), {}
        for replicate in self.plan(models):
            report = _read_json(replicate.out / "eval.json")
            if report is None or report.get("pipeline_eval") != identity:
                state = "does not exist" if report is None else "was made with other eval options"
                raise ConfigError(f"{replicate.out / 'eval.json'} {state}; run the eval stage first")
            reports[(replicate.name, replicate.seed)] = report
        return reports

    def reference(self, models: dict[str, str]) -> str:
        """The model every other is compared with, seed by seed: Llama when it is trained, else the composite."""
        return REFERENCE if REFERENCE in models else COMPOSITE

    def compare(
        self,
        models: dict[str, str],
        summaries: dict[tuple[str, int], dict[str, Any]],
        evaluations: dict[tuple[str, int], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        from composer.presets import get_preset
        from search.cost import serving_cost

        target = get_preset(self.config.extrapolate["target"]).arch
        seeds = list(self.config.seeds)
        reference = self.reference(models)
        losses = {name: {seed: summaries[(name, seed)]["val_loss"] for seed in seeds} for name in models}
        sweep = self.sweep_result(models)
        shared_lr = TrainConfig(**self.config.base_train).lr
        rates = self.starting_rates(models)
        speeds = {name: seed_summary([summaries[(name, s)]["tokens_per_s"] for s in seeds])["mean"]
                  for name in models}
        sequences = self.config.recall_sequences
        recalls = pipeline_recall.records(self.plan(models), sequences) if sequences else None
        rows = []
        for name, pattern in models.items():
            first = summaries[(name, seeds[0])]
            stats = analyze(target.with_pattern(pattern))
            loss = seed_summary([losses[name][s] for s in seeds])
            diff = paired_difference(losses[name], losses[reference])
            rows.append({
                "model": name,
                "pattern": stats.compact,
                "layers": stats.n_layers,
                "counts": stats.counts,
                "seeds": seeds,
                "val_losses": {str(s): losses[name][s] for s in seeds},
                "val_loss": loss["mean"],
                "val_loss_std": loss["std"],
                "val_loss_ci": loss["ci"],
                "diff_vs_reference": diff["mean"],
                "diff_ci": diff["ci"],
                "diff_per_seed": {str(s): d for s, d in zip(diff["seeds"], diff["differences"], strict=True)},
                "verdict": "reference" if name == reference else diff["verdict"],
                "tokens": first["tokens"],
                "tokens_per_s": speeds[name],
                "tokens_per_s_ratio": (speeds[name] / speeds[reference]
                                       if speeds[name] is not None and speeds[reference] else None),
                "params": first["params"],
                "non_embedding_params": first["non_embedding_params"],
                "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
                # a fixed-size state (Mamba-2, Gated DeltaNet) is the other half of a hybrid's cache; MoE layers
                # make the parameters one token uses fewer than the counted ones
                "state_bytes": stats.state_bytes_per_sequence,
                # KV cache, windows and states together per sequence at 4K and 32K tokens, as the search costs them
                "cache_bytes": serving_cost(target.with_pattern(pattern))["cache_bytes"],
                # the trained model's count less the experts a token skips (stats are at the preset's vocabulary)
                "active_params": first["params"] - (stats.params - stats.active_params),
                "runs": [str(run_dir(self.out / "train", name, s)) for s in seeds],
                # seeds whose training spiked (composer/training/stability.py); older summaries lack the fields
                "spiked_seeds": [s for s in seeds if summaries[(name, s)].get("loss_spikes")],
                "diverged_seeds": [s for s in seeds if summaries[(name, s)].get("diverged")],
                "chosen_lr": rates[name].lr,
                **{key: value for key, value in rates[name].to_dict().items() if key != "lr"},
                "lr_sweep": ({str(p["lr"]): p["val_loss"] for p in sweep["models"][name]["points"]}
                             if sweep else None),
            })
            if evaluations:
                rows[-1]["eval"] = downstream_summary({s: evaluations[(name, s)] for s in seeds})
            if recalls is not None:
                rows[-1]["recall"] = pipeline_recall.summarize(
                    {str(s): recalls[(name, s)] for s in seeds if (name, s) in recalls})
        validation = shared_validation(summaries.values())
        power = seed_separation(losses)
        comparison = {
            "reference": reference,
            "seeds": seeds,
            "confidence": CONFIDENCE,
            "validation": validation,
            "notes": comparison_notes(seeds, validation) + rate_notes(rates, shared_lr, sweep,
                                                                      self.config.explicit_lr),
            "power": power,
            **conclusion(rows, reference, power),
            "lr_sweep": None if sweep is None else {k: sweep[k] for k in ("rates", "fraction", "tokens", "seed")},
            "models": rows,
        }
        if evaluations:
            comparison["eval"] = self.eval_identity()
        if recalls is not None:
            comparison["recall"] = pipeline_recall.overview(rows, sequences, seeds)
        write_comparison(comparison, self.out)
        plot_loss_curves({name: [run_dir(self.out / "train", name, s) for s in seeds] for name in models},
                         self.out / "loss_curves.png")
        return comparison

    # -- all ----------------------------------------------------------------------------------------------
    def run(self, stages: tuple[str, ...] = STAGES) -> dict[str, Any]:
        """The stages in order, holding ``out``'s run lock (one pipeline per directory)."""
        unknown = sorted(set(stages) - set(STAGES))
        if unknown:
            raise ConfigError(f"unknown stage(s) {unknown}; choose from {', '.join(STAGES)}")
        from composer.training.runlock import run_lock

        if self.config.from_search:  # a search with no answer is one line before anything is written
            from search.results import answer_of

            answer_of(self.search_dir)
        with run_lock(self.out, "composer pipeline"):
            return self._run(stages)

    def _run(self, stages: tuple[str, ...]) -> dict[str, Any]:
        if self.config.eval and "eval" in stages:  # lm-eval installed, tasks known: before hours of training
            from composer.evaluation.downstream import check_tasks

            check_tasks(self.task_manager(), self.config.eval["tasks"])
        atomic_write_json(self.out / "pipeline.json", self.config.to_dict())
        result: dict[str, Any] = {"out": str(self.out)}
        if "search" in stages:
            result["search"] = self.run_search()
        # a finished search's answer is read on every run; a vote is redone by its stage, else read back
        aggregation = (self.run_aggregate() if "aggregate" in stages or self.config.from_search
                       else _require(self.out / "aggregate.json"))
        result["aggregate"] = {"pattern": aggregation["pattern"], "members": aggregation["members"]}
        if "extrapolate" not in stages and not (self.out / "extrapolate.json").is_file():
            raise ConfigError(f"no {self.out / 'extrapolate.json'}; run the extrapolate stage first")
        extrapolation = self.run_extrapolate(aggregation["pattern"])
        result["extrapolate"] = {k: extrapolation[k] for k in ("pattern", "method", "counts", "baselines")}
        models = self.models(extrapolation)
        self.use_search_rates(aggregation, models)
        if "train" in stages or "eval" in stages or "compare" in stages:
            summaries = self.run_train(models) if "train" in stages else self.finished(models)
            evaluations = None
            if self.config.eval and "eval" in stages:
                evaluations = self.run_eval(models)
            elif self.config.eval and "compare" in stages:
                evaluations = self.evaluations(models)
            if "compare" in stages:
                result["comparison"] = self.compare(models, summaries, evaluations)
        return result


def conclusion(rows: list[dict[str, Any]], reference: str, power: dict[str, Any]) -> dict[str, Any]:
    """``{"underpowered", "conclusion"}``: the comparison's answer in one line, naming a winner only when the
    budget can decide (``power``) and the composite's paired interval against the reference excludes 0."""
    reasons = [power["reason"]] if power["underpowered"] else []
    composite = next((row for row in rows if row["model"] == COMPOSITE), None)
    decided = (composite is not None and reference != COMPOSITE
               and composite["verdict"] in (VERDICT_LOWER, VERDICT_HIGHER))
    if composite is not None and reference != COMPOSITE and not decided:
        reasons.append(f"the composite's paired difference to {reference} has an interval containing 0 "
                       f"({composite['verdict']})")
    if reasons:
        return {"underpowered": True, "conclusion": f"{UNDERPOWERED}: " + "; ".join(reasons)}
    if composite is None or reference == COMPOSITE:
        return {"underpowered": False, "conclusion": "no Llama reference trained: compare the rows"}
    word = "lower" if composite["verdict"] == VERDICT_LOWER else "higher"
    return {"underpowered": False,
            "conclusion": f"the composite's validation loss is {word} than {reference}'s by "
                          f"{composite['diff_vs_reference']:+.4f} ({format_interval(composite['diff_ci'])}, "
                          f"paired over seeds)"}


def headline(report: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(task, metric, value) of every metric of an eval.json report, standard errors left out."""
    return [(task, metric, value) for task, values in report["tasks"].items()
            for metric, value in values["metrics"].items() if "_stderr" not in metric and value is not None]


def downstream_summary(reports: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``task/metric``: the mean over seeds with its Student-t interval (:func:`seed_summary`), the
    per-seed values and lm-eval's per-run standard errors (the sampling error of the task's documents)."""
    keys: dict[str, None] = {}
    for report in reports.values():
        keys.update({f"{task}/{metric}": None for task, metric, _ in headline(report)})
    summary = {}
    for key in keys:
        task, metric = key.split("/", 1)
        values, stderrs = {}, {}
        for seed, report in reports.items():
            metrics = report["tasks"].get(task, {}).get("metrics", {})
            values[str(seed)] = metrics.get(metric)
            stderr_name = metric.replace(",", "_stderr,", 1) if "," in metric else f"{metric}_stderr"
            stderrs[str(seed)] = metrics.get(stderr_name)
        stats = seed_summary(list(values.values()), CONFIDENCE)
        summary[key] = {"mean": stats["mean"], "std": stats["std"], "ci": stats["ci"], "per_seed": values,
                        "stderr_per_seed": stderrs}
    return summary


def format_downstream(comparison: dict[str, Any]) -> str:
    """Markdown table of the eval stage: per model, each task metric's mean over seeds and its interval."""
    rows = comparison["models"]
    keys = list(dict.fromkeys(key for row in rows for key in row.get("eval", {})))
    if not keys:
        return ""
    percent = round(100 * comparison["confidence"])
    lines = ["| model | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for row in rows:
        cells = []
        for key in keys:
            stats = row.get("eval", {}).get(key)
            if stats is None or stats["mean"] is None:
                cells.append("n/a")
                continue
            ci = f" [{stats['ci'][0]:.4f}, {stats['ci'][1]:.4f}]" if stats["ci"] is not None else ""
            cells.append(f"{stats['mean']:.4f}{ci}")
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    options = comparison.get("eval", {})
    limit = f", at most {options['limit']} documents per task" if options.get("limit") else ""
    seeds = ", ".join(map(str, comparison["seeds"]))
    lines += ["", f"Downstream (lm-evaluation-harness{limit}): mean over seeds {seeds} with the "
                  f"Student-t {percent}% interval over seeds; each run's own standard error (the sampling "
                  "error of the task's documents) is in comparison.json and the runs' eval.json."]
    return "\n".join(lines)


def _require(path: Path) -> Any:
    data = _read_json(path)
    if data is None:
        raise ConfigError(f"{path} does not exist; run the stage that writes it first")
    return data


CSV_COLUMNS = ("model", "pattern", "layers", "seeds", "chosen_lr", "lr_source", "search_lr", "val_loss", "val_loss_std", "val_loss_ci_low",
               "val_loss_ci_high", "diff_vs_reference", "diff_ci_low", "diff_ci_high", "verdict", "spiked_seeds",
               "diverged_seeds", "tokens_per_s", "tokens_per_s_ratio", "params", "non_embedding_params",
               "kv_cache_bytes_per_token", "state_bytes", "cache_bytes_32768", "active_params")


def comparison_notes(seeds: list[int], validation: dict[str, Any]) -> list[str]:
    """What a reader must know before trusting the table; empty when nothing needs saying."""
    notes = []
    if len(seeds) < 2:
        notes.append("one seed: no interval, so no difference in this table is evidence; train with seeds: [0, 1, 2]")
    if not validation["same"]:
        notes.append("the runs were scored on different validation text (val_fingerprint differs): their losses "
                     "are not comparable; use one data, data_seed and seq_len for every run")
    return notes


def _cache(row: dict[str, Any], length: str) -> str:
    """A row's cache per sequence at ``length`` tokens, or n/a (a comparison written before it was kept)."""
    size = (row.get("cache_bytes") or {}).get(length)
    return "n/a" if size is None else format_bytes(size)


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def format_comparison(comparison: dict[str, Any]) -> str:
    """A Markdown table: mean validation loss over seeds with its interval, the paired difference to the
    reference with its interval, and the verdict in words; the best mean is marked."""
    rows, reference = comparison["models"], comparison["reference"]
    percent = round(100 * comparison["confidence"])
    finite = [row["val_loss"] for row in rows if row["val_loss"] is not None]
    # no winner is starred when the budget cannot decide (comparisons written before issue 16 lack the field)
    best = min(finite) if finite and not comparison.get("underpowered") else None
    header = ("model", "pattern", "layers", "lr", "val loss (mean ± std)", f"{percent}% CI",
              f"Δ vs {reference} (paired)", f"{percent}% CI", "verdict", "tokens/s", "ratio", "params", "active",
              "KV B/token", "state B", "cache @32K")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        std = f" ± {row['val_loss_std']:.4f}" if row["val_loss_std"] is not None else ""
        marks = [f"{label}: seed {', '.join(map(str, row[key]))}"
                 for key, label in (("spiked_seeds", "spiked"), ("diverged_seeds", "diverged")) if row.get(key)]
        cells = [
            row["model"], f"`{row['pattern']}`", str(row["layers"]), _number(row.get("chosen_lr"), "g"),
            "all seeds diverged" if row["val_loss"] is None else
            f"{row['val_loss']:.4f}{std}{' *' if row['val_loss'] == best else ''}",
            format_interval(row["val_loss_ci"]),
            "—" if row["model"] == reference else _number(row["diff_vs_reference"], "+.4f"),
            "—" if row["model"] == reference else format_interval(row["diff_ci"]),
            row["verdict"] + (f" ({'; '.join(marks)})" if marks else ""),
            _number(row["tokens_per_s"], ",.0f"), _number(row["tokens_per_s_ratio"], ".2f"),
            f"{row['params']:,}", _number(row.get("active_params"), ","), f"{row['kv_cache_bytes_per_token']:,}",
            _number(row.get("state_bytes"), ","),
            _cache(row, CACHE_LENGTH),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    validation = comparison["validation"]
    seeds = ", ".join(map(str, comparison["seeds"]))
    footer = [
        "",
        f"Seeds {seeds} (every model trained once per seed on the same data, tokens and schedule). Intervals are "
        f"Student-t {percent}% intervals over seeds; Δ is each model's loss minus {reference}'s at the same seed. "
        "'within noise': the interval contains 0. active: the parameters one token uses (fewer than params with "
        "MoE layers); state B: the fixed recurrent state one sequence keeps (Mamba-2, Gated DeltaNet), beside the "
        "KV cache that grows with it. cache @32K: all of one sequence's cache at 32,768 tokens (bf16), as the "
        "search's --max-kv reads it.",
    ]
    if validation["same"]:
        footer.append(f"Validation: the same {validation['val_tokens']:,} held-out tokens for every run "
                      f"(fingerprint {validation['val_fingerprint']}).")
    power = comparison.get("power")
    if power:
        footer.append(
            f"Power: seed std within a model {_number(power['within_seed_std'], '.4f')}, std of the models' means "
            f"{_number(power['between_model_std'], '.4f')} (ratio {_number(power['separation'], '.2f')}); the seeds "
            f"rank the models alike at Spearman {_number(power['noise_ceiling'], '.2f')} (threshold "
            f"{power['threshold']}).")
    if comparison.get("conclusion"):
        footer.append(f"**Conclusion:** {comparison['conclusion']}.")
    footer += [f"**Note:** {note}" for note in comparison["notes"]]
    return "\n".join(lines + footer)


def _csv_row(row: dict[str, Any]) -> dict[str, Any]:
    low_high = lambda ci: (None, None) if ci is None else ci  # noqa: E731
    loss_low, loss_high = low_high(row["val_loss_ci"])
    diff_low, diff_high = low_high(row["diff_ci"])
    downstream = {key: stats["mean"] for key, stats in row.get("eval", {}).items()}
    return {**row, **downstream, **pipeline_recall.csv_fields(row),
            "cache_bytes_32768": (row.get("cache_bytes") or {}).get(CACHE_LENGTH),
            "seeds": " ".join(map(str, row["seeds"])),
            "spiked_seeds": " ".join(map(str, row.get("spiked_seeds", []))),
            "diverged_seeds": " ".join(map(str, row.get("diverged_seeds", []))), "val_loss_ci_low": loss_low,
            "val_loss_ci_high": loss_high, "diff_ci_low": diff_low, "diff_ci_high": diff_high}


def write_comparison(comparison: dict[str, Any], out: Path) -> None:
    atomic_write_json(out / "comparison.json", comparison)
    downstream = tuple(dict.fromkeys(key for row in comparison["models"] for key in row.get("eval", {})))
    recall = pipeline_recall.CSV_COLUMNS if comparison.get("recall") else ()
    atomic_write_csv(out / "comparison.csv", [_csv_row(row) for row in comparison["models"]],
                     CSV_COLUMNS + recall + downstream)
    tables = [format_comparison(comparison), pipeline_recall.format_recall(comparison), format_downstream(comparison)]
    atomic_write_text(out / "comparison.md", "\n\n".join(t for t in tables if t) + "\n")


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


def seed_band(run_dirs: list[Path], column: str) -> tuple[list[float], list[float], list[float], list[float]]:
    """(tokens, mean, low, high) over the seeds' curves at the points every seed logged (same schedule)."""
    curves = [dict(read_loss_curve(run, column)) for run in run_dirs]
    curves = [curve for curve in curves if curve]
    if not curves:
        return [], [], [], []
    tokens = sorted(set.intersection(*(set(curve) for curve in curves)))
    values = [[curve[t] for curve in curves] for t in tokens]
    return (tokens, [sum(v) / len(v) for v in values], [min(v) for v in values], [max(v) for v in values])


def plot_loss_curves(runs: dict[str, list[Path]], path: Path) -> Path:
    """Validation and training loss against tokens: the mean over seeds as a line, the seeds' range as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_val, ax_train) = plt.subplots(1, 2, figsize=(11, 4))
    for name, run_dirs in runs.items():
        style = {"linewidth": 2.2 if name == COMPOSITE else 1.3}
        for ax, column in ((ax_val, "val/loss"), (ax_train, "train/loss")):
            tokens, mean, low, high = seed_band(run_dirs, column)
            if tokens:
                (line,) = ax.plot(tokens, mean, label=f"{name} ({len(run_dirs)} seeds)", **style)
                if len(run_dirs) > 1:
                    ax.fill_between(tokens, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    for ax, title in ((ax_val, "validation loss"), (ax_train, "training loss")):
        ax.set_xlabel("tokens")
        ax.set_ylabel("loss")
        ax.set_title(f"{title}: mean over seeds, band = min..max")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
