"""The ``lm`` evaluator's budgets: tokens, sequence length, batch, rates and seeds of each named evaluation, and
the names derived from them (a rung at a target, ``NAME@PRESET``; a confirmation's further seeds,
``confirmN:NAME``). One table, read by the evaluator, the ladders (``search.fidelity``), the plan and the verdict
(a budget's measured seed spread)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from composer.errors import ConfigError
from search.evaluation import checked_rates
from search.evidence_record import SeedNoise, Setting


@dataclass(frozen=True)
class LMBudget:
    """Tokens, sequence length, global batch, learning rates and seeds of one ``lm`` evaluation."""

    name: str
    tokens: int
    seq_len: int
    batch_size: int
    lrs: tuple[float, ...]
    seeds: int = 1  # seeds trained at the chosen rate (the first one also chooses it)
    extrapolate_to: str | None = None  # a preset: train the pattern grown to its size, at its widths
    val_tokens: int | None = 65_536  # held-out tokens of the final score (the same text for every run)
    description: str = ""
    # the learning-rate schedule: "cosine" over the budget, or "wsd" with `warmup` a fixed number of steps, so that
    # runs of every budget share their rate until their cooldown (composer.training.continuation)
    schedule: str = "cosine"
    warmup: float | None = None  # steps (>= 1) or a fraction of the steps; None: composer train's default
    curve_points: int = 0  # validations spaced in log-steps, recorded as the candidate's curve (details["curve"])
    curve_tokens: int = 8_192  # held-out tokens per curve point (the first of the final score's)
    keeps_trunk: bool = False  # wsd: save the chosen rate's trunk for a later rung to continue
    # with keeps_trunk: also save the trunks of the grid's rates below the chosen one, so the next rung continues
    # each and chooses the rate at its own, longer horizon. The better rate falls as training lengthens (Bjorck et
    # al., "Scaling Optimal LR Across Token Horizons", ICLR 2025, arXiv 2409.19913), and here it did by a rung's 4x:
    # the default search's rung 1 chose 2e-3 for 5 of 7 finalists, and at rung 2's 500K tokens 1e-3 was better for
    # 4 of those 5 (by 0.007-0.044, one seed; Llama's alternation chose 2e-3 by 0.006 and lost 0.040 with it, which
    # turned the search's recommendation; docs/reports/rung-rate-horizon-2026-12-07.md)
    keeps_lower_trunks: bool = False
    continues: bool = False  # wsd: continue a candidate's trunk saved by an earlier rung, at that trunk's rate
    # when the chosen rate is the highest or lowest of a grid of 2 or more, train one rate past it (x2 or /2) and
    # take it if it is better: a best rate at the grid's edge says only that the optimum may lie beyond it
    extend_edge: bool = False
    # the seed spread of one run's score measured at this budget (search.verdict.SeedNoise): it stands in for the
    # seeds a last rung does not train when the search's answer is decided (new, known or tie)
    seed_noise: SeedNoise | None = None
    # a confirmation of a last rung (``confirm_budget``): every run starts afresh, on seeds after the rung's, at the
    # rate an earlier rung chose for the candidate (recorded with its promotion; else its kept trunk's, at the rung's
    # first seed; the budget's rates where neither is known), so its seeds pair with the last rung's
    # (search.evidence_record: a record takes further seeds only at its own rate)
    confirms: bool = False
    # sequences of each kind the trained model's recall is measured on after every run at the chosen rate
    # (search.trained_recall: the copy gain of random spans at the longest distance, at the run's seq_len, on its
    # held-out text); 0: not measured. A confirmation inherits its rung's
    recall_sequences: int = 0
    # whether --min-recall known and the recall objective read that trained recall (else the mixers-only probe does,
    # and the trained figure is recorded beside it): only where trained models of this setting can be expected to
    # retrieve. Not at the cpu ladder's target: there no trained model retrieves, with attention or without, even
    # trained 1M tokens at 256-512 tokens of context with repeated spans in the stream
    # (docs/reports/trained-recall-2026-11-28.md). The gpu ladder's target trains 200M tokens at 2,048 (its
    # measurement is issue 50's); the smoke ladder reads it to exercise the gpu ladder's path, deciding nothing
    recall_decides: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "lrs", tuple(sorted(checked_rates(self.lrs, f"lm budget {self.name!r}: lrs"))))
        if self.tokens < self.seq_len * self.batch_size:
            raise ConfigError(f"lm budget {self.name!r}: {self.tokens:,} tokens is less than one step of "
                              f"{self.batch_size} x {self.seq_len}")
        if not isinstance(self.seeds, int) or self.seeds < 1:
            raise ConfigError(f"lm budget {self.name!r}: seeds must be a positive integer, got {self.seeds!r}")
        if isinstance(self.recall_sequences, bool) or not isinstance(self.recall_sequences, int) or \
                self.recall_sequences == 1 or self.recall_sequences < 0:
            raise ConfigError(f"lm budget {self.name!r}: recall_sequences is 0 (not measured) or at least 2, got "
                              f"{self.recall_sequences!r}")
        if self.keeps_lower_trunks and not self.keeps_trunk:
            raise ConfigError(f"lm budget {self.name!r}: keeps_lower_trunks keeps trunks beside the chosen rate's, "
                              "so it needs keeps_trunk")
        if (self.keeps_trunk or self.continues) and (self.schedule != "wsd" or self.warmup is None
                                                     or self.warmup < 1):
            raise ConfigError(f"lm budget {self.name!r}: a trunk is shared only under schedule 'wsd' with its "
                              "warmup a number of steps (warmup >= 1)")

    @property
    def runs(self) -> int:
        """Training runs per candidate: one per rate, plus the further seeds at the chosen rate."""
        return len(self.lrs) + self.seeds - 1


# The warmup of every rung that produces figures, in steps: at least the horizon Adam's second-moment estimate
# averages over, 1 / (1 - beta2) steps (20 at the training default beta2 = 0.95; Ma & Yarats, arXiv 1910.04209,
# warm up over 2 / (1 - beta2)). Shorter, the first full-rate steps divide by an estimate of a few batches. At the 5-6
# steps the cpu rungs had until 2026-12-07, 14-layer A/M models at demo-4m spiked in their first 15 steps (the
# bottom attention layers' gradient norms 13-27 at 2e-3) and some runs never recovered within the rung: AAMMMM's
# seed 0 plateaued at 2.65 at 1e-3, 0.3 behind Llama's alternation in the default search; at 20 steps it scored
# 2.31 and every layout's loss was as low or lower (issue 71, docs/reports/adjacent-attention-2026-12-07.md).
# The smoke ladder's 16-step runs are plumbing, not figures (tests/search/lm/test_budgets.py holds the rule).
ADAM_WARMUP_STEPS = 20

LM_BUDGETS: dict[str, LMBudget] = {budget.name: budget for budget in (
    LMBudget("smoke", 40_000, 128, 8, (3e-3,), description="plumbing check: 40K tokens at one rate"),
    LMBudget("cpu", 400_000, 128, 16, (1e-3, 3e-3),
             description="400K tokens at lr 1e-3 and 3e-3 (about 1-3 minutes per candidate on 2 CPU cores)"),
    LMBudget("gpu", 50_000_000, 1024, 64, (1e-3, 3e-3, 6e-3), description="50M tokens at lr 1e-3, 3e-3, 6e-3"),
    # the rungs of successive halving (search.fidelity): rising tokens, the last at the target's size
    # the rungs of successive halving (search.fidelity). Every rung trains under warmup-stable-decay with a warmup
    # fixed in steps and records a curve (issue 36): a rung at the target's shape keeps its chosen rate's trunk,
    # and the next rung at that shape continues it (composer.training.continuation) instead of starting again
    LMBudget("rung-smoke-0", 8_192, 64, 8, (3e-3,), val_tokens=4_096, schedule="wsd", warmup=2, curve_points=4,
             curve_tokens=1_024, description="smoke ladder, rung 0"),
    LMBudget("rung-smoke-1", 16_384, 64, 8, (1e-3, 3e-3), val_tokens=4_096, extrapolate_to="tiny", schedule="wsd",
             warmup=2, curve_points=4, curve_tokens=1_024, recall_sequences=4, recall_decides=True,
             description="smoke ladder, last rung at the tiny preset"),
    LMBudget("rung-cpu-0", 100_000, 128, 8, (1e-3, 3e-3), schedule="wsd", warmup=ADAM_WARMUP_STEPS, curve_points=6,
             curve_tokens=4_096, description="cpu ladder, rung 0: 100K tokens, search-1m"),
    # rung 1 trains the pattern at the target's shape for a quarter of its tokens: the 6-layer proxy at 400K tokens
    # ranked the target at Spearman +0.12 over 12 AMSD patterns, the target's shape at 125K tokens at 0.90
    # (docs/reports/rung-transfer-2026-11-26.md), for about the same time per candidate
    LMBudget("rung-cpu-1", 125_000, 128, 16, (1e-3, 2e-3), extrapolate_to="demo-4m", schedule="wsd",
             warmup=ADAM_WARMUP_STEPS, curve_points=8, keeps_trunk=True, keeps_lower_trunks=True,
             description="cpu ladder, rung 1: stacked to demo-4m, 125K tokens (a quarter of the target's)"),
    LMBudget("rung-cpu-2", 500_000, 128, 16, (1e-3, 2e-3), extrapolate_to="demo-4m", schedule="wsd",
             warmup=ADAM_WARMUP_STEPS, curve_points=8, continues=True, recall_sequences=32,
             # 3 seeds of AMAMAM and MMAMMM each at this budget (wsd, lr 1e-3, fresh runs): pooled sd 0.0158, measured
             # under the 6-step warmup of before 2026-12-07 (a seed that plateaus after an early spike widens it)
             seed_noise=SeedNoise(0.0158, 4, "pooled over 3 seeds of AMAMAM and MMAMMM at rung-cpu-2's budget, "
                                              "docs/reports/curve-forecast-2026-11-26.md 'Over 3 seeds'",
                                  Setting("lm", "rung-cpu-2", "demo-4m", precision="bf16", device="cpu")),
             description="cpu ladder, last rung: stacked to demo-4m, 500K tokens (the transfer's target budget), "
                         "continued from rung 1's trunks at its rate and each lower one, the better taken"),
    LMBudget("rung-gpu-0", 5_000_000, 1024, 32, (1e-3, 3e-3), schedule="wsd", warmup=ADAM_WARMUP_STEPS,
             curve_points=8, description="gpu ladder, rung 0: 5M tokens"),
    LMBudget("rung-gpu-1", 50_000_000, 2048, 64, (3e-4, 1e-3, 2e-3), extrapolate_to="llama-350m", val_tokens=1_048_576,
             schedule="wsd", warmup=40, curve_points=8, curve_tokens=65_536, keeps_trunk=True, extend_edge=True,
             description="gpu ladder, rung 1: llama-350m widths, 50M tokens (a quarter of the target's)"),
    # 3 seeds: the search's answer is decided by a paired interval over them (search.verdict), which 2 cannot give
    LMBudget("rung-gpu-2", 200_000_000, 2048, 64, (3e-4, 1e-3, 2e-3), seeds=3, extrapolate_to="llama-350m",
             val_tokens=1_048_576, schedule="wsd", warmup=40, curve_points=8, curve_tokens=65_536, continues=True,
             recall_sequences=64, recall_decides=True, description="gpu ladder, last rung: llama-350m widths, 200M tokens, 3 seeds, continued from rung 1"),
)}




@dataclass(frozen=True)
class BudgetName:
    """An lm budget's name in its one grammar, ``[confirmN:]NAME[@PRESET]``, parsed here and nowhere else: the budget
    ``base`` of the table (:data:`LM_BUDGETS`), trained ``at`` a preset's size where one is named (a ladder's rung
    at the search's ``--target``: ``rung-cpu-2@demo-4m``), and with ``confirm_seeds`` that many further seeds of
    it from scratch at each candidate's chosen rate (:func:`confirm_budget`: ``confirm2:rung-cpu-2@demo-4m``). A
    name rather than a value, so that a search's worker processes resolve it too."""

    base: str
    at: str | None = None
    confirm_seeds: int | None = None

    GRAMMAR = re.compile(r"(?:confirm(?P<seeds>\d+):)?(?P<base>[^@]+)(?:@(?P<at>.*))?")

    @classmethod
    def parse(cls, name: str | BudgetName) -> BudgetName:
        if isinstance(name, BudgetName):
            return name
        match = cls.GRAMMAR.fullmatch(str(name))
        if match is None:
            raise ConfigError(unknown_budget_text(str(name)))
        seeds = match.group("seeds")
        return cls(match.group("base"), match.group("at") or None, None if seeds is None else int(seeds))

    @property
    def confirms(self) -> bool:
        return self.confirm_seeds is not None

    @property
    def confirmed(self) -> BudgetName:
        """The budget a confirmation confirms (itself where it confirms none)."""
        return BudgetName(self.base, self.at)

    def __str__(self) -> str:
        prefix = f"confirm{self.confirm_seeds}:" if self.confirms else ""
        return prefix + self.base + (f"@{self.at}" if self.at else "")


def confirm_budget(budget: str, seeds: int) -> str:
    """The name of ``seeds`` further seeds of ``budget`` (a ladder's last rung, ``NAME@PRESET``) at each candidate's
    chosen rate: ``confirm2:rung-cpu-2@demo-4m``."""
    return str(dataclasses.replace(BudgetName.parse(budget), confirm_seeds=seeds))


def unknown_budget_text(name: str) -> str:
    """The error for a --budget the lm evaluator does not know: the names a user types (the ladders, which are also
    one-shot budgets), with the rungs only explained (issue 49: it listed all eleven, rung-cpu-2 beside cpu)."""
    typed = [budget for budget in LM_BUDGETS if not budget.startswith("rung-")]
    return (f"unknown budget {name!r}; choose {', '.join(typed[:-1])} or {typed[-1]} (a successive-halving ladder, or "
            "under --strategy one-shot a single training budget of that name; a ladder's rungs, named rung-cpu-0 "
            "and the like, also run alone)")


def get_lm_budget(budget: str | BudgetName | LMBudget) -> LMBudget:
    """A named budget; ``NAME@PRESET`` is that budget trained at PRESET's size (a ladder's last rung at the
    search's ``--target``); ``confirmN:NAME`` is N further seeds of NAME from scratch (``confirm_budget``)."""
    if isinstance(budget, LMBudget):
        return budget
    name = BudgetName.parse(budget)
    if name.confirms:
        base = get_lm_budget(name.confirmed)
        return dataclasses.replace(base, name=str(budget), seeds=name.confirm_seeds, continues=False,
                                   keeps_trunk=False, extend_edge=False, confirms=True)
    if name.base not in LM_BUDGETS:
        raise ConfigError(unknown_budget_text(name.base))
    if name.at is None:
        return LM_BUDGETS[name.base]
    from composer.presets import get_preset

    get_preset(name.at)  # an unknown preset is one clear error here, not a failed trial
    return dataclasses.replace(LM_BUDGETS[name.base], name=str(budget), extrapolate_to=name.at)


def measured_seed_noise(evaluator: str, budget: str) -> SeedNoise | None:
    """The seed spread measured at a stage's budget (``LMBudget.seed_noise``), or None (another evaluator, or none
    measured): it stands in for seeds a stage's scores were not trained on (``search.verdict``)."""
    return get_lm_budget(budget).seed_noise if evaluator == "lm" else None


