"""The pipeline's stages in order (search, aggregate, extrapolate, train, eval, compare), each resumable: a
stage's result is a file under ``out`` that a run reads back instead of computing it again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.experiments import pipeline_recall
from composer.experiments.lr_sweep import run_sweep
from composer.experiments.pipeline.config import (
    COMPOSITE,
    CONFIDENCE,
    REFERENCE,
    STAGES,
    PipelineConfig,
    read_json,
)
from composer.experiments.pipeline.report import (
    comparison_notes,
    conclusion,
    downstream_summary,
    headline,
    plot_loss_curves,
    require_file,
    write_comparison,
)
from composer.experiments.replicates import (
    Replicate,
    finished_summary,
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
from composer.files import atomic_write_json
from composer.statistics import (
    paired_difference,
    seed_separation,
    seed_summary,
)
from composer.training.config import TrainConfig


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
        leaderboard = read_json(self.search_dir / "leaderboard.json") or []
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
        done = read_json(path)
        options = self.config.extrapolate
        # extrapolate.json files written before issue 47 grew every pattern with its attention repeated
        if (done is not None and done["source_pattern"] == pattern
                and done.get("rule", done.get("attention", "repeat")) == attention
                and done.get("target") == options["target"] and done.get("known") == known):
            return done
        # the one rule every command grows a search's answer by: a family the search entered in its own layout
        grown = grow(pattern, options["target"], known, attention, target_params=options.get("params"),
                     method=options.get("method", "auto"), rounding=options.get("rounding", "ceil"))
        result = grown.extrapolation
        baselines = matched_baselines(result.arch, tuple(self.config.baselines), seed=self.config.seed)
        # "attention": how this model's attention grew; "rule": the rule asked for (a known layout grows by its own)
        data = {**result.to_dict(), "rule": attention, "attention_from": source, "known": known, "how": grown.how,
                "baselines": {name: arch.pattern for name, arch in baselines.items()}}
        grown_by = (f"the search's known layout {known}: {grown.how}" if known else
                    f"attention {'kept' if attention == 'keep' else 'repeated'}: {source}")
        self.echo(f"== extrapolate: {pattern} -> {result.compact} ({result.method}, {result.n_layers} layers, "
                  f"{result.non_embedding_params:,} non-embedding params at {options['target']} widths; {grown_by})")
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
            done = read_json(self.out / "lr_sweep.json")
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
            done = read_json(path)
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
            report = read_json(replicate.out / "eval.json")
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

        self.preflight(stages)
        with run_lock(self.out, "composer pipeline"):
            return self._run(stages)

    def preflight(self, stages: tuple[str, ...]) -> None:
        """Every check that needs no training, before ``out`` is locked, pipeline.json written or a search started
        (issue 61: a bad target, tokens below one optimizer step or data without text failed after the search, or
        left pipeline.json): the finished search's answer, the search's settings and data, the target preset, and
        the training's plan, data and tokenizer (a placeholder pattern at the target, as every model trains); and
        that ``out`` can be a directory and the eval stage's device is here (issue 69)."""
        from composer.files import check_output_dir
        from composer.precision import resolve_device
        from composer.presets import get_preset

        check_output_dir(self.out)
        if self.config.eval and "eval" in stages:
            resolve_device(self.config.eval.get("device", "cpu"), flag="eval's device")
        if self.config.from_search:
            from search.results import answer_of

            answer_of(self.search_dir)
        elif "search" in stages:
            from search.config import SearchConfig
            from search.run import preflight

            preflight(SearchConfig(**{"seed": self.config.seed, **self.config.search, "out": str(self.out / "search")}),
                      echo=lambda _: None)  # its notes are the search's to print when it runs
        target = self.config.extrapolate["target"]
        get_preset(target)
        if "train" in stages:
            from composer.experiments.lr_sweep import plan_sweep
            from composer.training.run import preflight as check_training

            models = {COMPOSITE: "AM"}
            if self.config.lr_sweep is not None:
                plan_sweep(models, self.config.lr_sweep, self.out, self.config.base_train, target, self.config.seed)
            for replicate in plan_replicates(models, self.config.seeds[:1], self.out / "train", self.config.base_train,
                                             target):
                check_training(replicate.config)

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
                       else require_file(self.out / "aggregate.json"))
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


