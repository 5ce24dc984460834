"""``SearchConfig``: every knob of ``composer search``; YAML recipes (recipes/search/) use the same names."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.errors import ConfigError
from composer.precision import AUTOCAST_PRECISIONS, short_precision
from composer.training.config import LARGEST_SEED, WANDB_MODES, is_seed

STRATEGIES = ("one-shot", "end-incremental", "middle-incremental", "successive-halving")
# auto: successive halving where it applies (the lm evaluator, a budget that names a ladder, one objective), else
# one-shot. Why halving: a 6-layer proxy's ranking did not carry to the target (lm score vs demo-4m loss, Spearman
# +0.12 [-0.73, +0.76] over 12 AMSD patterns), so an answer is only as good as the ranking at the target that
# halving's last rung makes; the one-shot answer lost to two published layouts there (docs/search.md).
DEFAULT_TARGET = "llama-3.2-1b"
SAMPLERS = ("gp", "tpe", "random", "brute", "nsga2")
OBJECTIVES = ("score", "kv", "tokens_per_s", "recall")
# successive halving ranks its rungs by the score alone and returns, among its finalists, the ones no other beats on
# every one of these (recall: the finalists' probe, search.recall; kv: their cache at 32K tokens, search.cost)
HALVING_OBJECTIVES = ("score", "recall", "kv")
# The settings that change a score, or which patterns a study trains: spelled out in the study name ...
SCORE_SETTINGS_NAMED = ("evaluator", "budget", "strategy", "layers", "primitives", "sampler", "objectives", "seed",
                        "precision", "space")
# ... and the rest, as a digest (a default run and one with another --data used to share a study and its scores)
SCORE_SETTINGS_DIGESTED = ("widths", "target", "data", "tokenizer", "min_share", "max_share", "max_params", "max_kv",
                           "known", "prune", "compile", "depth", "attention_at_target", "text_field",
                           "depth_at_target", "max_latency", "min_throughput", "cost_device", "equal_cost",
                           "deployed_at", "equal_cost_figure")

# the key of the budget's definition digest in a study's stored score settings (budget_definition_digest)
BUDGET_DEFINITION = "budget_definition"
# a budget's fields that change no score: its prose, the seed spread a verdict reads (search.verdict), and the
# sequences a trained model's recall is measured on (search.trained_recall: beside the score, never in it; a study
# scored before it was measured resumes, its rows without the figure)
NOT_SCORED_BUDGET_FIELDS = ("description", "seed_noise", "recall_sequences", "recall_decides")


def budget_definition_digest(evaluator: str, budget: str, strategy: str = "one-shot") -> str | None:
    """12 hex digits over what a built-in evaluator's budget name stands for: its steps, tokens, lengths, rates,
    stem and the like, and for a successive-halving ladder its rungs and each rung's budget. A budget redefined
    under its old name (the recall probe's ``probe`` was, three times in issue 37) must not resume a study scored
    under the old definition; the name alone cannot tell. None for a custom evaluator or an unknown name (the
    evaluator refuses that with its own message)."""
    try:
        definitions = _budget_definitions(evaluator, budget, strategy)
    except ConfigError:
        return None
    if definitions is None:
        return None
    fields = [_set_fields(item) for item in definitions]
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=repr).encode()).hexdigest()[:12]


def _set_fields(item: Any) -> Any:
    """A budget's fields that differ from their defaults (nested dataclasses likewise), without the unscored ones:
    a field added later with a default that keeps the old behaviour leaves every digest as it was."""
    if not dataclasses.is_dataclass(item):
        return [_set_fields(value) for value in item] if isinstance(item, (list, tuple)) else item
    changed = {}
    for spec in dataclasses.fields(item):
        if spec.name in NOT_SCORED_BUDGET_FIELDS:
            continue
        value = getattr(item, spec.name)
        default = (spec.default_factory() if spec.default_factory is not dataclasses.MISSING  # type: ignore[misc]
                   else spec.default)
        if default is dataclasses.MISSING or value != default:
            changed[spec.name] = _set_fields(value)
    return changed


def _budget_definitions(evaluator: str, budget: str, strategy: str) -> list[Any] | None:
    """The dataclasses a budget name resolves to, for its evaluator: a ladder is itself and its rungs' budgets."""
    if evaluator == "recall":
        from search.recall import get_recall_budget

        return [get_recall_budget(budget)]
    if evaluator == "mad":
        from search.mad import BUDGETS

        return [BUDGETS[budget]] if budget in BUDGETS else None
    if evaluator != "lm":
        return None
    from search.lm import get_lm_budget

    ladder = ladder_named(budget, strategy)
    if ladder is not None:
        return [ladder, *(get_lm_budget(rung.budget) for rung in ladder.rungs)]
    return [get_lm_budget(budget)]


def ladder_named(budget: Any, strategy: str):
    """The successive-halving ladder an lm search's ``--budget`` names under ``strategy`` (``auto`` reads a name
    that is both a ladder and an lm budget as the budget), or None where it names an lm budget (or is one)."""
    from search.fidelity import LADDERS
    from search.lm import LM_BUDGETS

    if not isinstance(budget, str):
        return None
    from search.lm import BudgetName

    parsed = BudgetName.parse(budget)
    name = parsed.base
    if parsed.confirms:  # further seeds of a budget, never a ladder
        return None
    if name in LADDERS and (strategy == "successive-halving" or (strategy == "auto" and name not in LM_BUDGETS)):
        return LADDERS[name]
    return None


def preset_or_widths(preset: str | None, widths: str | None, where: str = "") -> str | None:
    """The preset a search's candidates train at, given under its name (``preset``) or its old one (``widths``):
    one check for the constructor and for recipes, so both refuse the same conflict in the same words."""
    if preset is not None and widths is not None and preset != widths:
        raise ConfigError(f"{where}widths is the old name of preset: give one, not preset {preset!r} and widths "
                          f"{widths!r}")
    return preset if preset is not None else widths


@dataclass
class SearchConfig:
    layers: int = 6  # searched layers per stage (the paper: 6 or 16); with space "mixers" the most mixer slots
    # the search space (search.spaces): "layers", a primitive per layer; "mixers", mixer slots with 0-2 MLPs after
    # each and a searched depth (search.mixer_space)
    space: str = "layers"
    primitives: str = "AM"
    strategy: str = "auto"  # auto (see STRATEGIES), one-shot, incremental; successive-halving: search.fidelity
    depth: int | None = None  # final depth of incremental strategies (default: 2 x layers)
    sampler: str | None = None  # default: gp (the paper's GP Bayesian optimisation); nsga2 for several objectives
    objectives: list[str] = field(default_factory=lambda: ["score"])  # + "kv" / "tokens_per_s": multi-objective
    trials: int = 20
    timeout: float | None = None  # seconds for the whole search
    evaluator: str = "lm"  # lm (default: ranks the target best, docs/search.md) | mad | recall | module:factory
    budget: str = "cpu"  # a named budget of the evaluator (smoke, cpu, gpu, ...)
    # preset whose widths candidates are trained at: `composer search --preset` and a recipe's `preset:` (issue 49);
    # the field keeps its old name, which study names' digests and stored score settings are keyed by
    widths: str = "search-1m"
    target: str | None = None  # preset of the KV-cache objective and reports (default llama-3.2-1b); with
    # successive-halving also the preset the last rung trains at (default: the ladder's own, e.g. demo-4m)
    # set by a strategy for its stages (a rung's config is one-shot at its own budget): the preset whose model the
    # costs are measured on, the search's report target; not a score setting (it changes no score)
    report_at: str | None = None
    data: str | None = None  # lm evaluator: text source (default: the offline corpus)
    tokenizer: str | None = None
    text_field: str = "text"  # lm evaluator: the column of --data's JSON or Parquet records that holds the text
    min_share: dict[str, float] = field(default_factory=dict)
    max_share: dict[str, float] = field(default_factory=dict)
    max_params: int | None = None  # non-embedding parameters at the search widths
    max_kv: str | None = None  # "64MiB@32K": most cache bytes per sequence at a length, of the model at the target
    # how a searched pattern's attention layers grow to the target (scaling.extrapolate.ATTENTION_RULES): "repeat"
    # with the pattern, or "keep" their number; the model the rungs at the target train and --max-kv measures
    attention_at_target: str = "repeat"
    # how many layers every model at the target has (a number, or a family's name for its own depth there): widths
    # scaled to the target's size (search.growth.grow); None grows by depth at the target's widths
    depth_at_target: int | str | None = None
    # the most decode ms per token at batch 1 and the least training tokens/s of a candidate's model at the target
    # ("known": no worse than the known layouts), on the machine the search runs on or, with cost_device, a
    # device of the cost model (cpu, h100, h200); search.cost.limits
    max_latency: str | None = None
    min_throughput: str | None = None
    cost_device: str | None = None
    # growth to equal cost (scaling.equal_cost): every model at the target is the widest whose cost (decode at batch 1,
    # training, or both: equal_cost_figure) on cost_device (default cpu), at the preset it is deployed at (default
    # the target), is no more than this published family's own layout's; None grows to the target's size
    equal_cost: str | None = None
    deployed_at: str | None = None
    equal_cost_figure: str = "both"
    # successive halving: the answer must recall at least this much at the probe's longest length (a fraction, or
    # "known": as much as the known layout with attention that has the best loss); the finalists are probed with `recall_budget`
    min_recall: float | str | None = None
    recall_budget: str = "probe"  # search.recall budget of the finalists' probe (their mixers without MLPs)
    # successive halving: seeds of the best new and the best known finalist at the last rung's budget, for a paired
    # interval behind the answer (1: the last rung's one seed, where a budget's measured seed spread stands in)
    confirm_seeds: int = 1
    prune: bool = True  # stop unpromising trials early (single objective only)
    known: bool = True  # enqueue Llama and the published layouts the primitives express first (search.known)
    # auto: bf16 where the device computes it natively (composer.precision), fp32, bf16 (autocast, fp32 weights)
    precision: str = "auto"
    compile: bool = False  # torch.compile each candidate
    workers: int = 1
    storage: str | None = None  # default: sqlite:///<out>/study.db
    study: str | None = None  # default: derived from the search settings, so re-running resumes
    seed: int = 0
    wandb: str = "auto"
    wandb_project: str = "composer-search"
    out: str = "runs/search"
    # the user's name of `widths` (SearchConfig(preset="tiny"), a recipe's or pipeline's `preset:`); not a field
    preset: dataclasses.InitVar[str | None] = None

    def __post_init__(self, preset: str | None = None) -> None:
        if preset is not None:
            given_widths = None if self.widths == SearchConfig.widths else self.widths
            self.widths = preset_or_widths(preset, given_widths)
        if self.wandb is False:  # YAML 1.1 reads a recipe's `wandb: off` as false: that is what the author meant
            self.wandb = "off"
        if isinstance(self.objectives, str):
            self.objectives = [part.strip() for part in self.objectives.split(",") if part.strip()]
        # fp32 or bf16 whichever way it is spelt (32-true, bf16-mixed: composer train's), so the study name is the same
        self.precision = short_precision(self.precision, AUTOCAST_PRECISIONS)
        if self.strategy == "auto":
            self.strategy = self.auto_strategy()
        checks = [
            (self.strategy in STRATEGIES, f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"),
            (self.sampler is None or self.sampler in SAMPLERS,
             f"sampler must be one of {', '.join(SAMPLERS)}, got {self.sampler!r}"),
            (self.objectives[:1] == ["score"] and set(self.objectives) <= set(OBJECTIVES),
             f"objectives must start with 'score' and use {', '.join(OBJECTIVES)}, got {self.objectives}"),
            (self.trials >= 1, f"trials must be at least 1, got {self.trials}"),
            (self.workers >= 1, f"workers must be at least 1, got {self.workers}"),
            (is_seed(self.seed), f"seed must be an integer from 0 to {LARGEST_SEED}, got {self.seed!r}"),
            (self.timeout is None or self.timeout > 0, f"timeout must be positive, got {self.timeout}"),
            (isinstance(self.confirm_seeds, int) and self.confirm_seeds >= 1,
             f"confirm_seeds must be a whole number of seeds, 1 or more, got {self.confirm_seeds!r}"),
            (self.confirm_seeds == 1 or (self.strategy == "successive-halving" and self.evaluator == "lm"),
             "--confirm-seeds trains successive halving's finalists at more seeds: use --strategy "
             "successive-halving with the lm evaluator"),
            (self.wandb in WANDB_MODES, f"--wandb must be one of {', '.join(WANDB_MODES)}, got {self.wandb!r}"),
            (isinstance(self.text_field, str) and self.text_field.strip() != "",
             f"--text-field names the column that holds the text, got {self.text_field!r}"),
            (self.text_field == "text" or (self.data is not None and self.evaluator not in ("mad", "recall")),
             "--text-field names the column of --data's records that holds the text: give --data (the lm "
             "evaluator's text source)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        from composer.pattern import parse_pattern
        from scaling.extrapolate import ATTENTION_RULES

        if self.attention_at_target not in ATTENTION_RULES:
            raise ConfigError(f"--attention-at-target must be one of {', '.join(ATTENTION_RULES)}, got "
                              f"{self.attention_at_target!r}")
        if self.depth_at_target is not None:
            self.growth  # an unknown family, or a depth no model reaches the target's size at: one error now
        from search.cost.limits import CostLimits, check_device

        limits = CostLimits.of(self)  # a malformed limit is one error now
        check_device(self.cost_device)
        if self.cost_device is not None and not limits.active and self.equal_cost is None:
            raise ConfigError("--cost-device says where --max-latency, --min-throughput and --equal-cost are costed: "
                              "give one of them, or drop it")
        if self.equal_cost is not None or self.deployed_at is not None or self.equal_cost_figure != "both":
            self.growth  # an unknown family, preset or figure: one error now
        if self.max_kv is not None:
            from search.cost import parse_max_kv

            parse_max_kv(self.max_kv)
        self._check_recall()
        parse_pattern(self.primitives)  # unknown symbols fail here, before anything is written to --out
        self._check_space()
        if self.strategy == "successive-halving":
            self._check_successive_halving()
        elif self.strategy != "one-shot" and self.final_depth <= self.layers:
            raise ConfigError(f"--final-layers ({self.final_depth}) must exceed --layers ({self.layers}) for "
                              f"{self.strategy}")

    def _check_space(self) -> None:
        """The presets and the searched space's constraints, here, before the search prints its header or writes
        config.json (issue 47: --widths nope, now --preset, failed after the header, --layers 0 and --min-share A=2
        left a config.json behind, and --max-params -5 skipped every candidate without end)."""
        from composer.presets import get_preset
        from search.spaces import build_space

        for flag, preset in (("preset", self.widths), ("target", self.target)):
            if preset is not None:
                try:
                    get_preset(preset)
                except ConfigError as err:
                    raise ConfigError(f"--{flag}: {err}") from None
        if self.max_params is not None and (isinstance(self.max_params, bool) or not isinstance(self.max_params, int)
                                            or self.max_params <= 0):
            raise ConfigError(f"--max-params is the most non-embedding parameters a candidate may have at the search "
                              f"widths, a positive whole number; got {self.max_params!r}")
        build_space(self.space, self.layers, self.primitives, self.min_share, self.max_share, self.max_params)
        if self.space != "layers" and self.strategy not in ("one-shot", "successive-halving"):
            raise ConfigError(f"--space {self.space} searches whole stacks, not the layers {self.strategy} adds "
                              "around a frozen pattern: use --strategy successive-halving or one-shot, or --space "
                              "layers")

    def _check_recall(self) -> None:
        """--min-recall and the recall objective: only successive halving probes its finalists."""
        if self.min_recall is not None:
            if isinstance(self.min_recall, str) and self.min_recall != "known":
                try:
                    self.min_recall = float(self.min_recall)
                except ValueError:
                    raise ConfigError(f"--min-recall takes a fraction such as 0.5, or 'known'; got "
                                      f"{self.min_recall!r}") from None
            if self.min_recall != "known" and not 0.0 <= float(self.min_recall) <= 1.0:
                raise ConfigError(f"--min-recall is a fraction of queries answered, 0 to 1; got {self.min_recall}")
        if self.asks_recall:
            if self.strategy != "successive-halving":
                raise ConfigError("--min-recall and the recall objective probe successive halving's finalists; "
                                  "use --strategy successive-halving (or --evaluator recall to search by recall)")
            from search.recall import get_recall_budget

            get_recall_budget(self.recall_budget)

    @property
    def asks_recall(self) -> bool:
        """Whether --min-recall or the recall objective asks for the finalists' recall."""
        return self.min_recall is not None or "recall" in self.objectives

    @property
    def recall_length(self) -> int:
        """The probe's longest length in tokens, where --min-recall is read (``recall_budget``'s lengths)."""
        from search.recall import get_recall_budget

        return max(get_recall_budget(self.recall_budget).lengths)

    def _last_rung_budget(self):
        from search.fidelity import get_ladder, rung_budget
        from search.lm import get_lm_budget

        ladder = get_ladder(self.budget)
        return get_lm_budget(rung_budget(ladder, len(ladder.rungs) - 1, self.target))

    @property
    def trained_recall_sequences(self) -> int:
        """The sequences successive halving's last rung measures each finalist's trained recall on (its budget's
        ``recall_sequences``, search.trained_recall); 0 where it measures none (or for other strategies)."""
        if self.strategy != "successive-halving" or self.evaluator != "lm":
            return 0
        return self._last_rung_budget().recall_sequences

    @property
    def trained_recall_decides(self) -> bool:
        """Whether the last rung's trained recall is what --min-recall known reads (its budget's ``recall_decides``:
        where trained models of that setting can retrieve), not only recorded beside the probe."""
        return self.trained_recall_sequences > 0 and self._last_rung_budget().recall_decides

    @property
    def reads_trained_recall(self) -> bool:
        """Whether the finalists' recall is read from their trained models (the last rung's measure, issue 48):
        recall is asked for (--min-recall known, or the recall objective) and the last rung measures it in a setting
        where trained models retrieve (``recall_decides``; not the cpu ladder's target, where the probe stays the
        filter). A numeric --min-recall is a fraction of MQAR queries answered, which only the probe measures."""
        numeric = self.min_recall is not None and self.min_recall != "known"
        return self.asks_recall and not numeric and self.trained_recall_decides

    @property
    def probes_recall(self) -> bool:
        """Whether successive halving probes its finalists' recall (search.recall, ``recall_budget``): where recall
        is asked for and not read from the trained models (``reads_trained_recall``)."""
        return self.strategy == "successive-halving" and self.asks_recall and not self.reads_trained_recall

    @property
    def why_probe(self) -> str | None:
        """Why the finalists are judged on the probe and not on their trained models' recall, for the summary;
        None where they are not judged on the probe."""
        if not self.probes_recall:
            return None
        if self.min_recall is not None and self.min_recall != "known":
            return "a numeric --min-recall is a share of MQAR queries answered, which only the probe measures"
        if not self.trained_recall_sequences:
            return "this budget's last rung does not measure the trained models' recall"
        return ("the trained models' own recall, recorded beside it, does not decide at this budget (no trained "
                "model retrieves at the cpu ladder's target: docs/recall.md)")

    @property
    def recall_source(self) -> str | None:
        """Which recall the finalists are judged on: ``trained``, ``probe``, or None (not asked for)."""
        return "trained" if self.reads_trained_recall else "probe" if self.probes_recall else None

    def auto_strategy(self) -> str:
        """What ``strategy: auto`` means for these settings (the reason is at STRATEGIES)."""
        from search.fidelity import LADDERS

        # several objectives stay with one-shot NSGA-II (it explores the trade-off over every candidate), unless
        # recall is one: only halving's finalists are probed for it
        several = self.multi_objective and not ("recall" in self.objectives
                                                and set(self.objectives) <= set(HALVING_OBJECTIVES))
        halving = self.evaluator == "lm" and self.budget in LADDERS and not several
        return "successive-halving" if halving else "one-shot"

    def _check_successive_halving(self) -> None:
        from search.fidelity import get_ladder

        if self.evaluator != "lm":
            raise ConfigError(f"successive-halving trains its rungs with the lm evaluator, not {self.evaluator!r}; "
                              "add --evaluator lm")
        if not set(self.objectives) <= set(HALVING_OBJECTIVES):
            raise ConfigError(f"successive-halving takes --objectives among {','.join(HALVING_OBJECTIVES)} (its "
                              f"finalists' front), got {','.join(self.objectives)}")
        get_ladder(self.budget)
        if self.target is not None:
            from composer.presets import get_preset

            get_preset(self.target)

    @property
    def report_target(self) -> str:
        """The preset whose widths the KV-cache objective and the reports use."""
        if self.report_at:
            return self.report_at
        if self.target:
            return self.target
        if self.strategy == "successive-halving":
            from search.fidelity import get_ladder
            from search.lm import get_lm_budget

            return get_lm_budget(get_ladder(self.budget).rungs[-1].budget).extrapolate_to or self.widths
        return DEFAULT_TARGET

    @property
    def sampler_name(self) -> str:
        # successive halving ranks its rungs by the score alone: its other objectives only pick the final front
        several = self.multi_objective and self.strategy != "successive-halving"
        return self.sampler or ("nsga2" if several else "gp")

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1

    @property
    def growth(self):
        """How a searched pattern becomes its model at the target (``search.growth.Growth``): the one rule every
        stage, the plan and the answer grow it by."""
        from scaling.equal_cost import EqualCost
        from search.growth import Growth, depth_at_target

        return Growth(self.attention_at_target,
                      depth_at_target(self.depth_at_target, self.report_target, "--depth-at-target"),
                      EqualCost.of(self.equal_cost, self.deployed_at, self.cost_device, self.equal_cost_figure))

    @property
    def final_depth(self) -> int:
        return self.depth or 2 * self.layers

    @property
    def resolved_precision(self) -> str:
        """``fp32`` or ``bf16``: what candidates train in on this machine (``auto`` resolved)."""
        if self.precision != "auto":
            return self.precision
        import torch

        from composer.precision import device_has_native_bf16

        return "bf16" if device_has_native_bf16("cuda" if torch.cuda.is_available() else "cpu") else "fp32"

    @property
    def trunks(self) -> str:
        """Where the ``lm`` evaluator keeps candidates' trunks for a later rung to continue (``search.trunks``)."""
        return str(Path(self.out) / "trunks")

    @property
    def study_name(self) -> str:
        """Derived from every setting that changes a score, so a re-run resumes and a changed run does not mix
        in. The settings spelled out in the name are the ones a reader looks for; the others
        (``SCORE_SETTINGS_DIGESTED``) add a digest, only where one differs from its default, so the studies of
        default runs keep the names they had before the digest existed. bf16 studies get a suffix (scores differ
        from fp32 in the last digits; fp32 names predate it)."""
        if self.study:
            return self.study
        objectives = "+".join(self.objectives)
        builtin = self.evaluator in ("mad", "lm", "recall")  # a custom evaluator's precision is its own business
        suffix = "-bf16" if builtin and self.resolved_precision == "bf16" else ""
        digest = self.settings_digest()
        suffix = self._schedule_suffix() + suffix
        depth = f"{self.layers}L" if self.space == "layers" else f"{self.layers}{self.space}"  # 6L, or 6mixers
        return (f"{self.evaluator}-{self.budget}-{self.strategy}-{depth}-{self.primitives}-"
                f"{self.sampler_name}-{objectives}-seed{self.seed}{suffix}{'-' + digest if digest else ''}")

    def _schedule_suffix(self) -> str:
        """``-wsd`` for an lm search whose budget (or ladder's rung 0) trains under warmup-stable-decay: the ladders
        moved from cosine to wsd (issue 36) under the same budget names, and a search resumed in an --out written
        before must train again rather than rank cosine scores beside wsd ones."""
        if self.evaluator != "lm":
            return ""
        from search.lm import LM_BUDGETS

        ladder = ladder_named(self.budget, self.strategy)
        from search.lm import BudgetName

        budget = LM_BUDGETS.get(ladder.rungs[0].budget if ladder is not None else BudgetName.parse(self.budget).base)
        return "-wsd" if budget is not None and budget.schedule == "wsd" else ""

    def settings_digest(self) -> str:
        """8 hex digits over the score settings not spelled out in the study name that differ from their
        defaults; empty when all are at their defaults."""
        defaults = SearchConfig.__dataclass_fields__
        changed = {}
        for name in SCORE_SETTINGS_DIGESTED:
            value, default = getattr(self, name), defaults[name]
            default = default.default_factory() if callable(default.default_factory) else default.default
            if value != default:
                changed[name] = value
        if not changed:
            return ""
        return hashlib.sha256(json.dumps(changed, sort_keys=True, default=str).encode()).hexdigest()[:8]

    def score_settings(self) -> dict[str, Any]:
        """Every setting that changes a score or which patterns a study trains, as stored with the study: a
        study named by ``--study`` (no digest) is refused when it was run with others (search.engine). With them
        the digest of what the budget's name stands for, so a budget redefined under its name is refused too."""
        values = {name: getattr(self, name) for name in SCORE_SETTINGS_NAMED + SCORE_SETTINGS_DIGESTED}
        values["sampler"] = self.sampler_name
        values["precision"] = self.resolved_precision
        definition = budget_definition_digest(self.evaluator, self.budget, self.strategy)
        if definition is not None:
            values[BUDGET_DEFINITION] = definition
        if self.equal_cost is not None:  # the cost model's constants decide each model's widths
            from composer.costmodel import TABLE_PATH

            values["cost_table"] = hashlib.sha256(Path(TABLE_PATH).read_bytes()).hexdigest()[:12]
        return json.loads(json.dumps(values, default=str))  # as it reads back from storage: lists, not tuples

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        """The keys a recipe may set: the fields and ``preset``, the user's name of ``widths``."""
        return [f.name for f in dataclasses.fields(cls)] + ["preset"]

    @classmethod
    def recipe_values(cls, path: str | Path) -> dict[str, Any]:
        """A recipe's settings by field name: ``preset:`` sets ``widths``; ``widths:`` still does, with the notice
        that its name is now ``preset``."""
        from composer.training.config import load_recipe, renamed_notice

        values = load_recipe(path, cls.field_names(), cls)
        if "widths" in values:
            renamed_notice("widths", "preset")
        if "preset" in values:
            values["widths"] = preset_or_widths(values.pop("preset"), values.get("widths"), f"recipe {str(path)!r}: ")
        return values

    @classmethod
    def from_recipe(cls, path: str | Path, **overrides: Any) -> SearchConfig:
        values = cls.recipe_values(path)
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)
