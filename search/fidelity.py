"""Successive halving: every candidate gets a cheap budget, the best go on to more tokens, finalists train at the target.

Why: the cheap proxies do not rank the target (``docs/evidence.md``: MAD's score against the ``demo-4m`` target,
Spearman -0.05 [-0.85, +0.68]). Only training at the target ranks the target, and that is too dear for every
candidate. A ladder of rungs spends the target's budget on a few finalists, chosen by ever dearer rungs, so the
search's final ranking is a ranking at the target for the patterns that reach it.

A *ladder* (``--strategy successive-halving --budget NAME``) is a list of ``lm`` budgets (``search.lm``), each with
the number of candidates it keeps:

* rung 0 is the ordinary search: ``--trials`` candidates proposed by the sampler (known layouts first,
  ``search.known``), each trained at the rung's budget and its grid of rates;
* rung k > 0 trains the best ``keep`` patterns of rung k - 1 at its own budget. Every *known* layout of the rung
  below goes on as well (the floor: the final ranking always holds the known layouts, each published family in its
  own layout at the target's size, ``search.growth.grow``; a rung with ``known="best"`` takes the best
  one alone);
* the last rung's budget grows each pattern to the target's size (``extrapolate_to``, or ``--target`` when one is
  named) and trains it there with the target's token budget. A middle rung may train at the target's size too,
  on fewer tokens (the ``cpu`` and ``gpu`` ladders' rung 1, a quarter of the target's tokens): the 6-layer
  proxy's ranking did not carry to the target (Spearman +0.12 over 12 ``AMSD`` patterns at 400K tokens), the
  target's shape at a quarter of its tokens did (0.90 [0.52, 0.99]), at about the same cost on CPU. Every rung
  that trains at the target's size follows ``--target``.

Why an explicit scheduler rather than Optuna's ``SuccessiveHalvingPruner``/``HyperbandPruner``: the pruners stop
one training run at intermediate reports, but the last rung is a different model (the pattern stacked to the
target's widths), and with one worker ASHA promotes the first trials before any comparison exists. Synchronous
halving over finished rungs is the textbook algorithm, and it resumes exactly: each rung is an Optuna study
(``<study>-rung<k>``) in the same storage, promotions are recomputed from the finished rung below, and a finished
pattern is never trained again.

This module holds the ladders and the promotion rule; the strategy that climbs them, rung by rung, is
``search.strategies.successive_halving``.
"""

from __future__ import annotations

from dataclasses import dataclass

from composer.errors import ConfigError
from search.lm import BudgetName, get_lm_budget


PROMOTE_BY = ("score", "forecast")


@dataclass(frozen=True)
class Rung:
    budget: str  # an lm budget's name (search.lm.LM_BUDGETS)
    keep: int | None  # candidates promoted into this rung; None for rung 0 (every candidate)
    # how the rung below is ranked for promotion into this one: its measured "score", or a "forecast" of each
    # candidate's score at the last rung's tokens from its curve (search.forecast), which also promotes every
    # candidate whose forecast could still be the best (at most `keep` more); `hedge` more: the best of each of
    # the highest attention shares not yet promoted (late learners)
    promote_by: str = "score"
    hedge: int = 0
    fit_from: float = 0.0  # forecast: fit only trunk points past this fraction of the trunk (search.forecast)
    # which known layouts of the rung below go on beside the chosen: "all" (every published family the primitives
    # express reaches the target in its own layout, issue 37) or "best" (the floor alone)
    known: str = "all"


@dataclass(frozen=True)
class Ladder:
    name: str
    rungs: tuple[Rung, ...]
    description: str

    def __post_init__(self) -> None:
        if not self.rungs or self.rungs[0].keep is not None or any(r.keep is None or r.keep < 1 for r in self.rungs[1:]):
            raise ConfigError(f"ladder {self.name!r}: rung 0 keeps every candidate, later rungs a positive number")
        if any(rung.known not in ("all", "best") for rung in self.rungs):
            raise ConfigError(f"ladder {self.name!r}: a rung's known is 'all' or 'best'")
        if any(rung.promote_by not in PROMOTE_BY for rung in self.rungs):
            raise ConfigError(f"ladder {self.name!r}: promote_by is one of {', '.join(PROMOTE_BY)}")
        for rung in self.rungs:
            get_lm_budget(rung.budget)


LADDERS: dict[str, Ladder] = {ladder.name: ladder for ladder in (
    Ladder("smoke", (Rung("rung-smoke-0", None), Rung("rung-smoke-1", 2)),
           "plumbing check: a tiny rung 0, the best 2 (+ the known layouts) at the tiny preset"),
    # rung 2 promotes by forecast: over 12 A/M patterns (docs/reports/curve-forecast-2026-11-26.md) rung 1's
    # snapshot ranked the target at Spearman -0.33, its forecast (fitted past a quarter of the trunk) at +0.59,
    # paired difference +0.92 [+0.20, +1.52]; the snapshot left the target's best two out, the forecast kept both
    Ladder("cpu", (Rung("rung-cpu-0", None), Rung("rung-cpu-1", 8),
                   Rung("rung-cpu-2", 3, promote_by="forecast", fit_from=0.25)),
           "100K tokens at search-1m for all; the best 8 (+ the known layouts) stacked to demo-4m for 125K "
           "tokens, two rates; the best 3 by forecast at 500K tokens, and any other that could still be best "
           "(+ the known layouts), continued there to 500K tokens at their rung-1 rate"),
    Ladder("gpu", (Rung("rung-gpu-0", None), Rung("rung-gpu-1", 8), Rung("rung-gpu-2", 3)),
           "one GPU (untested): 5M tokens for all; the best 8 (+ the known layouts) at llama-350m widths for "
           "50M tokens; the best 3 (+ the known layouts) there for 200M tokens, 3 seeds"),
)}


def get_ladder(name: str) -> Ladder:
    try:
        return LADDERS[name]
    except KeyError:
        raise ConfigError(f"unknown successive-halving budget {name!r}; choose one of: {', '.join(LADDERS)}") from None


def rung_budget(ladder: Ladder, index: int, target: str | None) -> str:
    """The lm budget name rung ``index`` trains at: at ``target``, when one is named, for the last rung and every
    rung that trains at the target's size (a budget with ``extrapolate_to``)."""
    name = ladder.rungs[index].budget
    at_target = index == len(ladder.rungs) - 1 or get_lm_budget(name).extrapolate_to is not None
    return str(BudgetName(name, target)) if target and at_target else name


def target_tokens_of(ladder: Ladder, target: str | None) -> tuple[int, int | None]:
    """The last rung's training tokens and, under ``wsd``, the tokens where its cooldown starts: what a forecast
    of a candidate's final score extrapolates to."""
    from composer.training.schedule import ScheduleConfig, decay_start

    budget = get_lm_budget(rung_budget(ladder, len(ladder.rungs) - 1, target))
    if budget.schedule != "wsd" or budget.warmup is None or budget.warmup < 1:
        return budget.tokens, None
    per_step = budget.seq_len * budget.batch_size
    steps = budget.tokens // per_step
    return budget.tokens, per_step * decay_start(ScheduleConfig("wsd", int(budget.warmup), steps))


def promote(rows: list[dict], keep: int, by: str = "score", target_tokens: int | None = None,
            target_trunk_tokens: int | None = None, hedge: int = 0, z: float = 1.0,
            fit_from: float = 0.0, known: str = "best", pool=None, model_of=None) -> list[dict]:
    """The rows that go on to the next rung (``rows`` is a leaderboard, best first), and the best known layout
    when it is not among them (the floor; ``known="all"``: every known layout, best first).

    ``by="score"``: the best ``keep`` by measured score. ``by="forecast"``: the best ``keep`` by each row's
    forecast at ``target_tokens`` (``search.forecast``; a row without a curve is ranked by its score), then every
    row whose forecast could still be the best at ``z`` (at most ``keep`` more); each chosen row carries its
    ``forecast``. The forecasts' noise is pooled over the rows' curves (``search.forecast.forecast_rung``): one
    curve of 3 or 4 points past ``fit_from`` cannot measure its own, and a forecast that no curve of the rung
    gives an interval to is never ruled out (``could_be_best``). ``hedge``: that many more, the best row of each
    of the highest attention shares not yet chosen, highest first: late learners, which a rung on fewer tokens
    than the target ranks too low. ``pool``: a test of
    a new row; the best ``keep`` rows that pass it go on too, by the same ranking (the answer's pool under
    ``--min-recall``: promoted by loss alone, the AMSD search's rung 2 kept 1 pattern with attention of 6).
    ``model_of``: the model the next rung trains for a row; a row whose model a better row (or a known layout)
    already stands for is left out (:func:`distinct_models`), so two patterns grown to one model take one place."""
    if model_of is not None:
        rows = distinct_models(rows, model_of)
    forecasts = {}
    if by == "forecast":
        from search.forecast import could_be_best, forecast_rung

        forecasts = forecast_rung(rows, target_tokens, target_trunk_tokens, fit_from)
        ranked = sorted(rows, key=lambda row: (forecasts[row["pattern"]].mean, rows.index(row)))
    else:
        ranked = list(rows)
    chosen = ranked[:keep]
    if forecasts:
        contenders = [row for pattern in could_be_best(forecasts, z) for row in rows if row["pattern"] == pattern]
        chosen += [row for row in contenders if row not in chosen][:keep]
    if pool is not None:
        passing = [row for row in ranked if not row.get("known") and pool(row)][:keep]
        chosen += [row for row in passing if row not in chosen]
    if hedge:
        chosen_shares = {round(row["attention_share"], 9) for row in chosen}
        best_of_share: dict[float, dict] = {}
        for row in ranked:  # best first, so the first row of a share is its best
            best_of_share.setdefault(round(row["attention_share"], 9), row)
        late = [best_of_share[share] for share in sorted(best_of_share, reverse=True) if share not in chosen_shares]
        chosen += late[:hedge]
    if forecasts:
        chosen = [{**row, "forecast": forecasts[row["pattern"]].as_dict()} for row in chosen]
    knowns = [row for row in rows if row.get("known")]
    for row in knowns if known == "all" else knowns[:1]:
        if row["pattern"] not in {other["pattern"] for other in chosen}:
            chosen.append(row)
    return chosen


def distinct_models(rows: list[dict], model_of) -> list[dict]:
    """``rows`` (best first) with one row per model ``model_of`` names: a known layout's row stands for its model
    wherever it ranks; otherwise the best row does. The AMSD search's rung 2 spent two of its 8 places on
    ``SADDSM`` and ``SDDASM``, one model at the target once their attention is kept."""
    by_known = {model_of(row): row for row in rows if row.get("known")}
    seen: set[str] = set()
    kept = []
    for row in rows:
        model = model_of(row)
        if model in seen or (model in by_known and by_known[model] is not row):
            continue
        seen.add(model)
        kept.append(row)
    return kept
