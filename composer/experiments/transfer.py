"""Proxy transfer: does the small-scale search score predict which architecture wins at the target scale?

This is the paper's central claim made measurable. From a finished search, K patterns spread over the score
range (best, worst and evenly between; or patterns named by the user) are extrapolated to a target preset with
the project's extrapolator and each is trained once per seed on the same data, tokens and schedule. The ranking
spread over is the search's leaderboard; for a successive-halving search (``rungs.json`` in its directory) it is
rung 0's, which ranks every candidate, unless ``rung`` (``--rung N`` or ``last``) picks another rung: the final
leaderboard holds only the last rung's few finalists. Asking for more patterns than the ranking holds is an
error, never a smaller experiment (``search_ranking``, ``choose``). The report
(``transfer.json``, ``transfer.md``, ``transfer.png`` under ``out``) gives:

- ``spearman`` / ``kendall``: rank correlation between the search score and the *negated* mean target loss, so
  +1 means the search orders the patterns exactly as the target does and 0 means it says nothing;
- ``spearman_ci`` / ``kendall_ci``: a hierarchical bootstrap interval (patterns and, within each, seeds are
  resampled; ``composer.statistics.bootstrap_rank_correlation``);
- ``noise_ceiling``: the mean Spearman correlation between the target's own seeds. A search score cannot agree
  with the target better than the target agrees with itself; when the ceiling is low, the budget is too small
  to decide anything, and the verdict says so instead of reporting a correlation as if it were a property of
  the proxy;
- ``underpowered``: True when the ceiling is below ``composer.statistics.POWER_THRESHOLD`` (or unknown: one
  seed) or the correlation's interval contains 0; the verdict then reads "underpowered: raise --tokens or
  --seeds" with the reason, instead of naming a result;
- per pattern, ``vs_baseline``: the paired per-seed difference to its parameter-matched baseline (``baseline``,
  default Llama's ``AM`` alternation at the depth whose non-embedding size is nearest the pattern's;
  ``scaling.matching``) with its interval and verdict. Patterns of similar size share a baseline, and a baseline
  identical to a pattern's target reuses that pattern's runs. Baselines train with the same seeds, data and
  learning-rate sweep, and take no part in the rank correlation or the noise ceiling.

Learning rates (``composer.experiments.search_rates``), strongest rule first: with ``train.lr_sweep`` (``--lr-sweep``) every
pattern first trains at each rate on a short budget and then uses its best rate for all its seeds
(``composer.experiments.lr_sweep``; ``lr_sweep.json/.csv/.md/.png``); an explicit ``train.lr`` (``--lr``) is shared by every
pattern; otherwise, when the search recorded a rate per trial (its ``lm`` and ``recall`` evaluators), each pattern
trains at its own search rate (the one it was scored at in the ranking spread over: for a halving search, the chosen
rung's) and its matched baseline at the rate the search chose for the baseline's layout at
the search depth (llama: ``AMAMAM`` for a six-layer search) when the search scored it; the rest share the default
rate. Why: a rate that suits one architecture handicaps another (issue 16), and the search already found one per
pattern, though at its own widths: a starting point, not a rate tuned at the target, as the notes say. Each row of
transfer.json gives its ``lr``, ``lr_source`` (``search``, ``sweep`` or ``shared``), ``search_lr`` and
``search_lr_pattern``.

The default budget (``DEFAULT_TRAIN``) is the smallest one measured on CPU whose noise ceiling reaches the
threshold with the default data (docs/evidence.md, "How many tokens decide").

Runs live under ``out/train/<source pattern>/seed-<s>``; finished (pattern, seed) runs are never retrained, so a
killed transfer re-run with the same command resumes (``composer.experiments.replicates``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from composer.errors import ConfigError
from composer.experiments.lr_sweep import SWEEP_KEYS, run_sweep, split_sweep
from composer.experiments.replicates import (
    check_workers,
    parse_seeds,
    plan_replicates,
    run_dir,
    run_replicates,
    shared_validation,
)
from composer.experiments.search_rates import (
    StartingRate,
    lookup,
    per_model,
    rate_notes,
    search_rates,
    starting_rates,
)
from composer.files import atomic_write_json, make_output_dir, write_outputs
from composer.pattern import layers as layer_tokens
from composer.statistics import (
    POWER_THRESHOLD,
    UNDERPOWERED,
    bootstrap_rank_correlation,
    format_interval,
    noise_ceiling,
    paired_difference,
    seed_summary,
)
from composer.training.config import TrainConfig, apply_overrides, check_types, load_recipe, renamed_notice
from search.aggregate import Population, Scored, load_population, read_rung, read_rungs

_PER_RUN = ("arch", "preset", "out", "run_name", "seed")  # set by the transfer for each run
MIN_PATTERNS = 3  # a rank correlation needs at least three points
DEFAULT_TARGET = "demo-4m"  # d 192, Llama's 16 layers at ~4.4M params: trains on a CPU
# The training every run shares unless a recipe or flag says otherwise: the offline corpus at demo-4m widths,
# with the smallest token budget measured to reach POWER_THRESHOLD (docs/evidence.md); fp32 so that runs on
# machines with and without native bf16 give the same numbers.
DEFAULT_TRAIN: dict[str, Any] = {
    "tokens": 500_000, "seq_len": 128, "batch_size": 16, "lr": 2e-3, "schedule": "cosine", "warmup": 0.05,
    "max_documents": 2000, "precision": "32-true", "val_interval": 1_000_000, "log_interval": 50,
}


@dataclass
class TransferConfig:
    """What ``composer transfer`` measures; a YAML recipe (``recipes/transfer/``) sets any of these fields."""

    search: str | None = None  # a search --out directory, leaderboard.json, study.db or Optuna storage URL
    study: str | None = None  # the study in a storage holding several
    # named patterns (each must be scored by the search) instead of a spread, or how many to spread (--patterns N
    # sets k: one flag for "which patterns", as --seeds takes a count or a list)
    patterns: list[str] | int | None = None
    k: int = 8  # patterns spread over the score range
    # a successive-halving search's rung whose ranking k is spread over: an index or "last"; None: rung 0 (every
    # candidate) for a halving search, the leaderboard for any other
    rung: int | str | None = None
    target: str | None = None  # target preset: widths and size to extrapolate to (None: DEFAULT_TARGET)
    method: str = "auto"  # extrapolation: stack, stretch or auto
    # the patterns' attention layers: repeat, or keep (scaling.extrapolate.ATTENTION_RULES); None: the rule the search
    # scored them by (its config.json's attention_at_target, search.aggregate.search_attention), else repeat
    attention: str | None = None
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    # the parameter-matched baseline each pattern is compared with: llama or striped-1:R (depth-matched to each
    # pattern's non-embedding size, scaling.matching); None trains no baseline
    baseline: str | None = "llama"
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields shared by every run
    out: str = "runs/transfer"
    n_boot: int = 10_000
    confidence: float = 0.95
    workers: int = 1  # runs trained at once, each in its own process (small models leave a GPU mostly idle)
    # the old spelling of `target` (issue 49: --target on every command), from a recipe's `to:` or a keyword caller
    to: dataclasses.InitVar[str | None] = None

    def __post_init__(self, to: str | None = None) -> None:
        if to is not None:
            renamed_notice("to", "target")
            if self.target not in (None, to):
                raise ConfigError(f"to is the old spelling of target: give one, not to {to!r} and target "
                                  f"{self.target!r}")
        self.target = self.target or to or DEFAULT_TARGET
        if self.search is None:
            raise ConfigError("transfer needs a search to read scores from: pass --from-search DIR (a composer search "
                              "--out directory, a leaderboard.json, a study.db or a storage URL)")
        if not isinstance(self.train, dict):
            raise ConfigError("the train section must be a mapping of TrainConfig option: value")
        check_types(self.train, TrainConfig, "train: ")
        # the user's own rate overrides the search's; the default does not (composer.experiments.search_rates)
        self.explicit_lr = self.train.get("lr") is not None
        self.train = {**DEFAULT_TRAIN, **self.train}
        valid = [f for f in TrainConfig.field_names() if f not in _PER_RUN] + list(SWEEP_KEYS)
        unknown = sorted(set(self.train) - set(valid))
        if unknown:
            raise ConfigError(f"train has unknown option(s) {unknown}; valid: {', '.join(valid)}")
        self.base_train, self.lr_sweep = split_sweep(self.train)
        if isinstance(self.patterns, str) and self.patterns.strip().isdigit():
            self.patterns = int(self.patterns)
        if isinstance(self.patterns, int) and not isinstance(self.patterns, bool):
            self.k, self.patterns = self.patterns, None
        if isinstance(self.patterns, str):
            self.patterns = [part for part in self.patterns.replace(" ", "").split(",") if part]
        self.rung = parse_rung(self.rung)
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < MIN_PATTERNS:
            raise ConfigError(f"--patterns N must be an integer >= {MIN_PATTERNS} (a rank correlation needs three "
                              f"patterns), got {self.k!r}")
        if isinstance(self.n_boot, bool) or not isinstance(self.n_boot, int) or self.n_boot < 100:
            raise ConfigError(f"n_boot must be an integer >= 100, got {self.n_boot!r}")
        check_workers(self.workers)
        from scaling.extrapolate import ATTENTION_RULES

        # by_search: the rule is the search's (config.json), so the transfer must refuse a search grown by width
        self.by_search = self.attention is None
        self.attention, self.attention_from = attention_rule(self.attention, self.search)
        if self.attention not in ATTENTION_RULES:
            raise ConfigError(f"attention must be one of {', '.join(ATTENTION_RULES)}, got {self.attention!r}")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence!r}")
        self.seeds = parse_seeds(self.seeds)
        if self.baseline in ("", "none", "null"):
            self.baseline = None
        from scaling.matching import is_depth_matched

        if self.baseline is not None and not is_depth_matched(self.baseline):
            raise ConfigError(f"baseline must be llama, striped-1:R (R a positive integer) or none, got "
                              f"{self.baseline!r}: the transfer matches one baseline depth to each pattern's size")

    @classmethod
    def from_recipe(cls, path: str | Path | None, **overrides: Any) -> TransferConfig:
        """A recipe's values (when ``path`` is given) with ``overrides`` on top; ``train.X`` keys go to train."""
        allowed = [f.name for f in dataclasses.fields(cls)] + ["to"]  # `to`: target's old spelling
        values = load_recipe(path, allowed) if path is not None else {}
        values["train"] = dict(values.get("train") or {})
        if "to" in values and overrides.get("target") is not None:  # the flag wins over the recipe's old key
            renamed_notice("to", "target")
            values.pop("to")
        return cls(**apply_overrides(values, overrides))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Candidate:
    """A searched pattern chosen for the transfer experiment, with its extrapolation to the target."""

    source_pattern: str
    score: float
    search_rank: int  # 1 = the search's best
    target_pattern: str
    compact: str
    layers: int
    non_embedding_params: int
    baseline: str | None = None  # the model name of its matched baseline (a key of Transfer.baselines)
    attention: str = "repeat"  # how its attention grew to the target (TransferConfig.attention, or its search's)


@dataclass(frozen=True)
class Baseline:
    """A parameter-matched baseline shared by the candidates of about its size."""

    name: str  # e.g. "llama-18L"; a candidate's source pattern when the baseline is that candidate's target
    pattern: str
    compact: str
    layers: int
    non_embedding_params: int


def attention_rule(asked: str | None, search: str) -> tuple[str, str]:
    """How the patterns' attention grows to the target, and why: ``asked`` (``--attention-at-target``) when given, else
    the
    rule the search scored and costed its patterns by (its ``--attention-at-target``), else ``repeat``."""
    from search.aggregate import search_attention

    searched, where = search_attention(search)
    if asked is not None:
        differs = searched is not None and searched != asked
        return asked, "as asked" + (f" (the search's was {searched}, {where})" if differs else "")
    if searched is not None:
        return searched, f"the search's --attention-at-target {searched} ({where})"
    return "repeat", (f"the default: no search config.json beside {search} names its --attention-at-target; pass "
                      "--attention-at-target keep for a search run with keep")


def spread(ranked: list[Any], k: int) -> list[Any]:
    """``k`` items evenly spread over a best-first list: always its first and last, the rest evenly between."""
    if k >= len(ranked):
        return list(ranked)
    index = np.unique(np.round(np.linspace(0, len(ranked) - 1, k)).astype(int))
    return [ranked[i] for i in index]


def parse_rung(value: Any) -> int | str | None:
    """None (the default ranking), "last", or a rung index; a flag or recipe may give the index as text."""
    if value is None or value == "last":
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ConfigError(f"rung must be a rung index (0, 1, ...) or 'last', got {value!r}")


def search_ranking(search: str, study: str | None = None, rung: int | str | None = None) -> Population:
    """The scored patterns whose ranking the transfer spreads over (and whose rates and scores it uses).

    Why rung 0 by default for a successive-halving search: its leaderboard.json (and its storage's preferred
    study) is the last rung's, a handful of finalists, while rung 0 ranks every candidate at one budget. The
    rungs are never merged: scores from different budgets are not comparable. A named ``study`` reads that
    study as before."""
    path = Path(str(search))
    if rung is not None:
        if study is not None:
            raise ConfigError("give --rung or --study, not both: each picks the ranking to spread --patterns N over")
        if not path.is_dir():
            raise ConfigError(f"--rung reads rungs.json in a composer search --out directory; {search} is not one")
        return read_rung(path, rung)
    if study is None and path.is_dir() and read_rungs(path) is not None:
        return read_rung(path, 0)
    return load_population(search, study=study)


def best_first(population: Population) -> list[Scored]:
    """The population's patterns best first (equal scores by pattern, so the order never depends on storage)."""
    maximize = population.direction == "maximize"
    return sorted(population.scored, key=lambda s: (-s.score if maximize else s.score, s.pattern))


def ranking_name(population: Population, search: str) -> str:
    """The ranking in words for messages: a halving search's rung, or the search itself."""
    rung = population.source.get("rung")
    return f"the search {search}" if rung is None else f"rung {rung} of {search}"


def too_few(population: Population, k: int, search: str) -> str:
    """Why ``k`` patterns cannot be spread over ``population``'s ranking, and what would allow it, in one line."""
    n = len(population.scored)
    fixes = [f"lower --patterns to {n}"] if n >= MIN_PATTERNS else []
    fixes.append("take --rung 0 (every candidate)" if population.source.get("rung") else "run more trials")
    return (f"{ranking_name(population, search)} ranks only {n} distinct patterns, fewer than --patterns {k}: "
            + " or ".join(fixes))


def choose(population: Population, k: int, patterns: list[str] | None = None, search: str = "the search"
           ) -> list[Scored]:
    """The patterns to train, best first: the named ``patterns`` (each must be in the ranking) or ``k`` spread
    over it. Fewer patterns than asked is an error, never a silently smaller experiment."""
    ranked = best_first(population)
    if not patterns:
        if len(ranked) < k:
            raise ConfigError(too_few(population, k, search))
        return spread(ranked, k)
    from composer.pattern import parse_pattern

    wanted = [parse_pattern(p) for p in patterns]
    rank_of = {s.pattern: i for i, s in enumerate(ranked)}
    missing = [p for p in wanted if p not in rank_of]
    if missing:
        raise ConfigError(f"pattern(s) {', '.join(missing)} were not scored by the search "
                          f"({len(ranked)} scored patterns in {ranking_name(population, search)}); "
                          "name scored patterns")
    chosen = [ranked[i] for i in sorted({rank_of[p] for p in wanted})]
    if len(chosen) < MIN_PATTERNS:
        raise ConfigError(f"the search scored {len(ranked)} distinct pattern(s); a rank correlation needs at "
                          f"least {MIN_PATTERNS}: run more trials or name more patterns")
    return chosen


class Transfer:
    """Select, extrapolate, train over seeds and correlate; every step's result is a file under ``out``."""

    def __init__(self, config: TransferConfig, echo: Callable[[str], None] = print) -> None:
        self.config = config
        self.out = Path(config.out)
        self.echo = echo
        self.rates: dict[str, float] = {}  # searched pattern -> the rate its search trial chose (select fills it)
        self.baselines: dict[str, Baseline] = {}
        self.attention_notes: list[str] = []  # why a pattern grew by another rule than config.attention (select)

    def select(self) -> tuple[list[Candidate], dict[str, Any]]:
        """The patterns to train, best search score first, and what the search was.

        Each pattern brings the score, rank and learning rate of the ranking spread over (``search_ranking``):
        for a halving search, the chosen rung's, i.e. the rate its trial chose at that rung's budget."""
        from search.growth import grow

        config = self.config
        population = search_ranking(config.search, config.study, config.rung)
        self.rates = search_rates(population.scored)
        rank_of = {s.pattern: i for i, s in enumerate(best_first(population), 1)}
        chosen = choose(population, config.k, config.patterns, config.search)
        self.attention_notes = []
        rule = self.attention_rule()
        # the one rule every command grows a search's pattern by (search.growth.grow): a published family the
        # search entered grows in its own layout at the target, as the search trained it
        results = {s.pattern: grow(s.pattern, config.target, self.known_of(s.pattern), rule,
                                   method=config.method).extrapolation for s in chosen}
        names = self.match_baselines(results)
        candidates = [Candidate(s.pattern, float(s.score), rank_of[s.pattern], results[s.pattern].pattern,
                                results[s.pattern].compact, results[s.pattern].n_layers,
                                results[s.pattern].non_embedding_params, names.get(s.pattern),
                                results[s.pattern].attention)
                      for s in chosen]
        source = {"source": population.source, "direction": population.direction, "scored_patterns": len(rank_of)}
        return candidates, source

    def attention_rule(self) -> str:
        """How a new pattern's attention grows: the transfer's rule (its search's, unless ``--attention-at-target`` is
        given).
        A search that grew by width is refused: this grows by depth."""
        if self.config.by_search:
            from search.aggregate import refuse_depth_search

            refuse_depth_search(self.config.search, "composer transfer")
        return self.config.attention

    def known_of(self, pattern: str) -> str | None:
        """The known layout ``pattern`` is among those its search entered (None for a leaderboard or storage with
        no best.json beside it), and ``attention_notes`` says how it grows."""
        from search.growth import known_growth_note
        from search.results import known_in_search

        known = known_in_search(pattern, self.config.search)
        note = known_growth_note(pattern, known, self.config.attention)
        if note:
            self.attention_notes.append(note)
        return known

    def match_baselines(self, results: dict[str, Any]) -> dict[str, str]:
        """Fill ``self.baselines`` (name -> Baseline) and return each source pattern's baseline name.

        Each pattern's baseline is matched to its own non-embedding size; a baseline equal to some pattern's
        target is that pattern (its runs serve both), so nothing is trained twice."""
        from composer.accounting import non_embedding_params
        from scaling.matching import baseline_pattern

        self.baselines = {}
        if self.config.baseline is None:
            return {}
        by_target = {result.pattern: source for source, result in results.items()}
        names = {}
        for source, result in results.items():
            pattern = baseline_pattern(self.config.baseline, result.arch, target=result.non_embedding_params)
            arch = result.arch.with_pattern(pattern)
            name = by_target.get(pattern, f"{self.config.baseline}-{arch.n_layers}L")
            self.baselines[name] = Baseline(name, pattern, arch.compact, arch.n_layers, non_embedding_params(arch))
            names[source] = name
        return names

    def starting_rates(self, candidates: list[Candidate], sweep: dict[str, Any] | None = None
                       ) -> dict[str, StartingRate]:
        """Every trained model's rate and its source (``composer.experiments.search_rates``): a pattern's search rate is its
        own trial's; a baseline's is the trial of its layout at the search depth of the patterns it serves."""
        from scaling.matching import layout_at_depth

        found = {c.source_pattern: lookup(self.rates, c.source_pattern) for c in candidates}
        for name in self.baselines:
            if name not in found:  # a baseline that is some pattern's target already has that pattern's rate
                served = next(c for c in candidates if c.baseline == name)
                depth = len(layer_tokens(served.source_pattern))
                found[name] = lookup(self.rates, layout_at_depth(self.config.baseline, depth))
        shared_lr = TrainConfig(**self.config.base_train).lr
        return starting_rates(found, shared_lr, explicit_lr=self.config.explicit_lr, sweep=sweep)

    def run(self) -> dict[str, Any]:
        config = self.config
        candidates, search = self.select()
        make_output_dir(self.out)
        atomic_write_json(self.out / "transfer-config.json", config.to_dict())
        self.echo(f"== transfer: {len(candidates)} of {search['scored_patterns']} patterns from {config.search}"
                  f"{rung_text(search['source'])} -> {config.target}, seeds {', '.join(map(str, config.seeds))}")
        self.echo(f"   attention {grown(config.attention)} at {config.target}: {config.attention_from}")
        for note in self.attention_notes:
            self.echo(f"   {note}")
        for c in candidates:
            self.echo(f"   #{c.search_rank:<3} {c.source_pattern:<16} score {c.score:.4f} -> {c.compact} "
                      f"({c.layers} layers)")
        for b in self.baselines.values():
            self.echo(f"   matched {config.baseline}: {b.name} = {b.compact} ({b.non_embedding_params:,} "
                      f"non-embedding params) for "
                      + ", ".join(c.source_pattern for c in candidates if c.baseline == b.name))
        models = {c.source_pattern: c.target_pattern for c in candidates}
        models.update({b.name: b.pattern for b in self.baselines.values()})
        sweep = None
        if config.lr_sweep is not None:
            sweep = run_sweep(models, config.lr_sweep, self.out, config.base_train, config.target, config.seeds,
                              run_prefix=f"{self.out.name}-", echo=self.echo, workers=config.workers)
        rates = self.starting_rates(candidates, sweep)
        self.echo("   learning rates: "
                  + ", ".join(f"{name} {rate.lr:g} ({rate.source})" for name, rate in rates.items()))
        plan = plan_replicates(models, config.seeds, self.out / "train", config.base_train, config.target,
                               run_prefix=f"{self.out.name}-", per_model=per_model(rates))
        summaries = run_replicates(plan, echo=self.echo, workers=config.workers)
        report = self.report(candidates, search, summaries, sweep, rates)
        write_report(report, self.out)
        return report

    def report(self, candidates: list[Candidate], search: dict[str, Any],
               summaries: dict[tuple[str, int], dict[str, Any]],
               sweep: dict[str, Any] | None = None,
               rates: dict[str, StartingRate] | None = None) -> dict[str, Any]:
        config = self.config
        shared_lr = TrainConfig(**config.base_train).lr
        rates = self.starting_rates(candidates, sweep) if rates is None else rates
        seeds = config.seeds
        sign = 1.0 if search["direction"] == "maximize" else -1.0  # correlate "higher is better" scores
        def trained(name: str) -> dict[str, Any]:
            """A model's losses per seed, their summary, learning rate (and its source), instability and runs."""
            losses = [summaries[(name, s)]["val_loss"] for s in seeds]
            loss = seed_summary(losses, config.confidence)
            return {"losses": {str(s): v for s, v in zip(seeds, losses, strict=True)},
                    "mean_loss": loss["mean"], "std": loss["std"], "ci": loss["ci"],
                    **rates[name].to_dict(),
                    "diverged_seeds": [s for s in seeds if summaries[(name, s)].get("diverged")],
                    "spiked_seeds": [s for s in seeds if summaries[(name, s)].get("loss_spikes")],
                    "runs": [str(run_dir(self.out / "train", name, s)) for s in seeds]}

        rows = [{**dataclasses.asdict(c), **trained(c.source_pattern)} for c in candidates]
        per_seed = [[row["losses"][str(s)] for s in seeds] for row in rows]
        baselines = {name: {**dataclasses.asdict(b), **trained(name)} for name, b in self.baselines.items()}
        for row in rows:  # a pattern that is its own baseline has no difference to report
            if row["baseline"] not in (None, row["source_pattern"]):
                reference = baselines[row["baseline"]]["losses"]
                row["vs_baseline"] = paired_difference({s: row["losses"][str(s)] for s in seeds},
                                                       {s: reference[str(s)] for s in seeds}, config.confidence)
        correlation = bootstrap_rank_correlation([sign * c.score for c in candidates], per_seed,
                                                 n_boot=config.n_boot, confidence=config.confidence)
        ceiling = noise_ceiling({s: [losses[i] for losses in per_seed] for i, s in enumerate(seeds)})
        first = summaries[(candidates[0].source_pattern, seeds[0])]
        said = verdict(correlation["spearman_ci"], ceiling["mean"], len(seeds))
        report = {
            "spearman": correlation["spearman"],
            "spearman_ci": correlation["spearman_ci"],
            "kendall": correlation["kendall"],
            "kendall_ci": correlation["kendall_ci"],
            "noise_ceiling": ceiling["mean"],
            "noise_ceiling_pairs": ceiling["pairs"],
            "noise_ceiling_spearman_brown": ceiling["spearman_brown"],
            # the most any score can correlate with the seeds' mean loss, sqrt(Spearman-Brown reliability)
            "max_attainable_spearman": ceiling["ceiling"],
            "verdict": said,
            "underpowered": said.startswith(UNDERPOWERED),
            "power_threshold": POWER_THRESHOLD,
            "lr_sweep": None if sweep is None else {k: sweep[k] for k in ("rates", "fraction", "tokens", "seed")},
            "notes": rate_notes(rates, shared_lr, sweep, config.explicit_lr),
            "n_patterns": len(candidates),
            "n_boot": correlation["n_boot"],
            "confidence": config.confidence,
            "search": {**search, "path": str(config.search)},
            "to": config.target,  # the report's key stays "to": benchmarks/proxy_transfer.py reads it
            "method": config.method,
            "attention": config.attention,
            "attention_from": config.attention_from,
            "seeds": seeds,
            "tokens": next((s["tokens"] for s in summaries.values() if not s.get("diverged")), first["tokens"]),
            "validation": shared_validation(summaries.values()),
            "patterns": rows,
            "baseline": config.baseline,
            "baselines": list(baselines.values()),
        }
        return report


def grown(attention: str) -> str:
    """An attention rule in words: ``kept`` or ``repeated``."""
    return "kept" if attention == "keep" else "repeated"


def rung_text(source: dict[str, Any]) -> str:
    """", rung R (N rungs) at budget B" when the ranking is a halving search's rung (``search.aggregate.read_rung``),
    so a report says which rung's scores it correlates; "" for any other ranking."""
    if source.get("rung") is None:
        return ""
    return f", rung {source['rung']} ({source.get('rungs', '?')} rungs) at budget {source.get('budget') or '?'}"


def verdict(spearman_ci: list[float] | None, ceiling: float | None, n_seeds: int) -> str:
    """The result in words, saying first whether the target could decide at all.

    A result is named only when the target's seeds agree at ``POWER_THRESHOLD`` or better and the correlation's
    interval excludes 0; otherwise the verdict starts with ``UNDERPOWERED`` and says why.
    """
    if spearman_ci is None:
        return "undefined: the target losses (or scores) are all equal"
    if n_seeds < 2:
        return f"{UNDERPOWERED}: one seed gives no noise ceiling, so nothing says whether the target can decide"
    if ceiling is None or ceiling < POWER_THRESHOLD:
        shown = "undefined" if ceiling is None else f"{ceiling:.2f}"
        return (f"{UNDERPOWERED}: the target's own seeds agree at Spearman {shown} (< {POWER_THRESHOLD}), "
                "so it cannot rank the patterns")
    low, high = spearman_ci
    if low > 0:
        return "transfers: the interval excludes 0"
    if high < 0:
        return "anti-transfers: higher search scores predict worse target losses"
    return (f"{UNDERPOWERED}: the interval contains 0, so this budget shows no evidence of transfer either way "
            "(the target itself can rank the patterns; more patterns (--patterns N) also narrow the interval)")


def format_report(report: dict[str, Any]) -> str:
    """transfer.md: the correlation with its interval and ceiling, then one row per pattern."""
    percent = round(100 * report["confidence"])
    seeds = report["seeds"]

    def number(value: float | None) -> str:
        return "n/a" if value is None else f"{value:+.3f}"

    def loss(value: float | None) -> str:
        return "diverged" if value is None else f"{value:.4f}"

    baseline = report.get("baseline")
    lines = [
        f"# Proxy transfer: search score vs loss at {report['to']}",
        "",
        f"- Spearman {number(report['spearman'])} ({percent}% CI {format_interval(report['spearman_ci'], 3)}), "
        f"Kendall {number(report['kendall'])} ({format_interval(report['kendall_ci'], 3)}); hierarchical bootstrap "
        f"over patterns and seeds, {report['n_boot']:,} replicates.",
        f"- Noise ceiling (Spearman between the target's seeds): {number(report['noise_ceiling'])} "
        f"(a result is named only at {report['power_threshold']} or above).",
        f"- Verdict: {report['verdict']}.",
        f"- {report['n_patterns']} patterns x seeds {', '.join(map(str, seeds))}, {report['tokens']:,} tokens each; "
        f"search direction {report['search']['direction']} ({report['search']['scored_patterns']} scored patterns"
        f"{rung_text(report['search'].get('source') or {})}).",
        *([f"- Patterns grown to {report['to']} with their attention {grown(report['attention'])} "
           f"({report['attention_from']})."] if report.get("attention_from") else []),  # reports before issue 47
        *(f"- {note[0].upper()}{note[1:]}." for note in report["notes"]),
        "",
        "| search rank | pattern | score | target | layers | lr | mean loss | std | " + f"{percent}% CI | "
        + " | ".join(f"seed {s}" for s in seeds) + " |"
        + (f" vs {baseline} (paired Δ) | {percent}% CI | verdict |" if baseline else ""),
        "|" + "---|" * (9 + len(seeds) + (3 if baseline else 0)),
    ]

    def cells(row: dict[str, Any]) -> list[str]:
        std = "n/a" if row["std"] is None else f"{row['std']:.4f}"
        source = f" ({row['lr_source']})" if row.get("lr_source") else ""  # reports before issue 25 lack it
        return ([f"`{row['compact']}`", str(row["layers"]), f"{row['lr']:g}{source}", loss(row["mean_loss"]),
                 std, format_interval(row["ci"])]
                + [loss(row["losses"][str(s)]) + (" (spiked)" if s in row["spiked_seeds"] else "") for s in seeds])

    for row in report["patterns"]:
        line = [str(row["search_rank"]), f"`{row['source_pattern']}`", f"{row['score']:.4f}", *cells(row)]
        if baseline:
            diff = row.get("vs_baseline")
            if diff is None:
                line += ["is the baseline" if row["baseline"] else "n/a", "", ""]
            else:
                line += [number(diff["mean"]), format_interval(diff["ci"]), f"{diff['verdict']} vs `{row['baseline']}`"]
        lines.append("| " + " | ".join(line) + " |")
    if report.get("baselines"):
        lines += ["", f"Matched {baseline} baselines (each pattern's is the one nearest its non-embedding size; "
                      "not part of the correlation):", "",
                  "| baseline | non-embedding params | target | layers | lr | mean loss | std | " + f"{percent}% CI | "
                  + " | ".join(f"seed {s}" for s in seeds) + " |",
                  "|" + "---|" * (8 + len(seeds))]
        for row in report["baselines"]:
            lines.append("| " + " | ".join([f"`{row['name']}`", f"{row['non_embedding_params']:,}", *cells(row)])
                         + " |")
    return "\n".join(lines)


def write_report(report: dict[str, Any], out: Path) -> None:
    write_outputs(out, "transfer", report, table=format_report(report), plot=plot_transfer)


def plot_transfer(report: dict[str, Any], path: Path) -> Path:
    """Search score against mean target loss, error bars spanning the seeds' interval (or range)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in report["patterns"] if row["mean_loss"] is not None]
    x = [row["score"] for row in rows]
    y = [row["mean_loss"] for row in rows]
    finite = [[v for v in row["losses"].values() if v is not None] for row in rows]
    low = [row["mean_loss"] - (row["ci"][0] if row["ci"] else min(v)) for row, v in zip(rows, finite, strict=True)]
    high = [(row["ci"][1] if row["ci"] else max(v)) - row["mean_loss"] for row, v in zip(rows, finite, strict=True)]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.errorbar(x, y, yerr=[low, high], fmt="o", capsize=3)
    for row in rows:
        ax.annotate(row["compact"] if len(row["source_pattern"]) > 12 else row["source_pattern"],
                    (row["score"], row["mean_loss"]), fontsize=7, xytext=(4, 3), textcoords="offset points")
    lines = [b for b in report.get("baselines", [])  # the matched baselines, as reference lines
             if b["mean_loss"] is not None and b["name"] not in {row["source_pattern"] for row in rows}]
    for i, baseline in enumerate(lines):
        label = None
        if i == 0:
            losses = [b["mean_loss"] for b in lines]
            label = (f"matched {report.get('baseline')}: {', '.join(b['compact'] for b in lines)} "
                     f"({min(losses):.3f}-{max(losses):.3f})")
        ax.axhline(baseline["mean_loss"], color="grey", linestyle="--", linewidth=0.8, label=label)
    if lines:
        ax.legend(fontsize=7, loc="best")
    ci = format_interval(report["spearman_ci"], 2)
    ceiling = "n/a" if report["noise_ceiling"] is None else f"{report['noise_ceiling']:.2f}"
    rho = "n/a" if report["spearman"] is None else f"{report['spearman']:.2f}"
    percent = round(100 * report["confidence"])
    ax.set_title(f"Spearman {rho} {ci}, noise ceiling {ceiling}; bars: {percent}% CI over seeds", fontsize=9)
    ax.set_xlabel(f"search score ({report['search']['direction']})")
    ax.set_ylabel(f"val loss at {report['to']} (mean over {len(report['seeds'])} seeds)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["Baseline", "Candidate", "Transfer", "TransferConfig", "best_first", "choose", "format_report", "parse_rung",
           "search_ranking", "spread", "verdict", "write_report"]
