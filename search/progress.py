"""Live progress of a search: trials done of total, the latest result, best so far, elapsed time and ETA; and,
while a candidate trains, a line every ~10 s with where the search is and how long the whole of it has left.

Why the second kind of line (issue 36): README's default search printed its known layouts and then nothing for
150 s, until its first candidate's two runs ended. The ``lm`` evaluator reports from inside its training runs
(``composer.training.progress.Heartbeat`` through ``LanguageModelEvaluator.heartbeat``); :meth:`SearchProgress.
heartbeat` turns those reports into lines such as::

    rung 1 of 0-2 [  3/9] MMAMMMMMAMMM  run 1/2 lr 1e-3  62,000/125,000 tokens  2,310 tok/s  rung eta 4:10  search eta ~18 min

How the ETA is estimated (:class:`SearchEta`), and what it assumes:

* work is counted in training FLOPs (``composer.accounting``: forward + backward per token of the model that is
  trained, at the budget's sequence length); a held-out token scored for the loss or the curve costs a third of a
  training token (forward only);
* a stage's work is its candidates x runs x (tokens trained + tokens scored). Every candidate of a stage is taken
  to cost the mean of the stage's enqueued patterns (its known layouts, or a rung's promotions), each sized by the
  model the budget trains for it (``search.growth.Grown`` at ``extrapolate_to``: a known family in its own layout,
  Llama's and the paper's stacked, a new pattern grown by the search's rule);
* the later rungs of successive halving train ``keep`` + 1 candidates (the floor: the best known layout, when it
  is not among the best) and a rung that ``continues`` trains one rate per seed from the trunk the rung below kept,
  so only the tokens past that trunk;
* the speed is the work done in this process divided by the wall time since its first run began, so what is not
  training (validation, building models, writing trunks) slows the estimate as it slows the search. It is measured
  on the models trained so far: on 2 CPU cores the demo-4m models of rungs 1 and 2 ran about 1.3 times as many
  FLOPs/s as rung 0's (``benchmarks/results/default_search_am_e2e-2026-11-26.json``), so during rung 0 the
  search's ETA runs high. Pruned, cached and failed candidates cost less than it assumes. Hence the ``~``.

Only a strategy whose stages are known in advance (successive halving's ladder, or a single stage) gets a
``search eta``; the others get their stage's. With ``--workers`` > 1 the candidates train in other processes: the
search's process prints the per-trial lines, and each worker (:func:`worker_heartbeat`) its own runs' lines, named
by the worker and without an ETA (a worker sees only its own runs)::

    recall probe: worker 1  SADDDD  run 1/1 lr 1e-3  1,212,416/4,096,000 tokens  1,650 tok/s

Before, a ``--workers 2`` recall probe printed nothing for the 10-20 minutes its first finalists trained.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.engine import FINISHED
from search.growth import Growth
from search.resume import is_evaluation

FORWARD_SHARE = 1 / 3  # a forward-only token's share of a training token's FLOPs (forward 2N, backward 4N)
EVERY_S = 9.0  # the least time between two heartbeat lines of one run (Heartbeat reports every 10 s)


def stage_label(kind: str, index: int, count: int) -> str:
    """How the search's lines name rung (or stage) ``index`` of ``count``: ``rung 1 of 0-1``. Counted from 0, as
    the study names (``<study>-rung1``), ``rungs.json`` and the summary's ``rungs:`` line count them, so every
    line of one search gives a rung the same number."""
    return f"{kind} {index} of 0-{count - 1}"


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _about(seconds: float) -> str:
    """A rough duration: ``~18 min``, ``~1 h 40 min``."""
    minutes = round(max(0.0, seconds) / 60)
    if minutes < 1:
        return "<1 min"
    hours, minutes = divmod(minutes, 60)
    return f"~{hours} h {minutes:02d} min" if hours else f"~{minutes} min"


def _rate(lr: float) -> str:
    """A learning rate as the budgets write it: ``1e-3``, ``2.5e-4``."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def evaluations_done(study: optuna.Study, promoted: frozenset[str] | None = None) -> int:
    """A stage's finished candidates, as its lines number them (:func:`stage_done`)."""
    return stage_done(study.get_trials(deepcopy=False, states=FINISHED), promoted)


def stage_done(finished: list[FrozenTrial], promoted: frozenset[str] | None = None) -> int:
    """Of a stage's ``finished`` trials: those that trained their pattern (a sampled stage's budget counts them;
    cached answers and twins are free), or, for a stage that trains only its ``promoted`` patterns (a rung), each
    promoted pattern with a finished trial however it was answered. A rung resumed after its promotions changed
    numbered its candidates "[15/14]": the trial of a pattern no longer promoted still counted."""
    if promoted is None:
        return sum(is_evaluation(t) for t in finished)
    return len(promoted & {t.user_attrs.get("pattern") for t in finished if "worker_died" not in t.user_attrs})


def run_tokens(info: dict[str, Any]) -> int | None:
    """The tokens a reported run trains in all: its budget in whole steps (a ``wsd`` run's trunk reports its own
    ``total_tokens``, short of the budget), else the reporting call's total."""
    budget, per_step = info.get("budget_tokens"), info.get("tokens_per_step")
    if budget:
        return int(budget) // int(per_step) * int(per_step) if per_step else int(budget)
    return int(info["total_tokens"]) if info.get("total_tokens") else None


# the recall probe (search.recall) of one finalist: about 10 min on 2 CPU cores (composer search --min-recall's
# help), in core-seconds; not timed on a GPU. The search's eta and `composer search --plan` both use it.
PROBE_CORE_SECONDS = 1200.0


@dataclass(frozen=True)
class StageWork:
    """The training one stage asks for: ``candidates`` x ``runs`` runs, each training from ``start_tokens`` (the
    trunk a continued run starts from, else 0) to ``budget_tokens`` and scoring ``eval_tokens`` held-out tokens;
    ``flops_per_token`` of the model trained (1.0 where it cannot be counted: the work is then in tokens)."""

    candidates: int
    runs: int
    budget_tokens: int
    start_tokens: int = 0
    eval_tokens: int = 0
    flops_per_token: float = 1.0
    widths: str = ""
    # a continued stage whose rung below kept more than one rate's trunk (keeps_lower_trunks): a candidate continues
    # between least_runs and runs of them; 0: always runs
    least_runs: int = 0

    @property
    def run_work(self) -> float:
        return self.flops_per_token * (self.budget_tokens - self.start_tokens + FORWARD_SHARE * self.eval_tokens)

    @property
    def fewest_runs(self) -> int:
        """The fewest runs a candidate trains: ``least_runs`` where set, else ``runs``."""
        return self.least_runs or self.runs

    @property
    def expected_runs(self) -> float:
        """Runs a candidate is expected to train: midway between the fewest and ``runs`` (whether the rung below
        chose a rate with lower ones beside it is not known before it did)."""
        return (self.fewest_runs + self.runs) / 2

    @property
    def work(self) -> float:
        return self.candidates * self.expected_runs * self.run_work


@functools.lru_cache(maxsize=512)
def trained_flops_per_token(pattern: str, widths: str, extrapolate_to: str | None, seq_len: int,
                            growth: Growth = Growth(), known: str | None = None) -> float | None:
    """Training FLOPs per token of what the ``lm`` evaluator trains for ``pattern`` (grown to ``extrapolate_to``
    when the budget has one, by the search's ``growth``: the known layout ``known`` in its own rule, as
    ``LanguageModelEvaluator.grown`` does); None when it cannot be counted."""
    try:
        from composer.accounting import analyze
        from composer.presets import resolve_architecture

        if extrapolate_to:
            arch = growth.grow(pattern, extrapolate_to, known).arch
        else:
            arch, _ = resolve_architecture(pattern, widths, widths)
        return float(analyze(arch, seq_len=seq_len).flops_per_token)
    except Exception:  # a pattern or preset the accounting does not know: the estimate falls back to tokens
        return None


def _trunk_tokens(budget) -> int:
    """Tokens of the trunk a ``keeps_trunk`` budget leaves: the steps before its cooldown."""
    from composer.training.config import TrainConfig
    from composer.training.schedule import ScheduleConfig, decay_start

    per_step = budget.seq_len * budget.batch_size
    fraction = TrainConfig.__dataclass_fields__["decay_fraction"].default
    steps = decay_start(ScheduleConfig("wsd", warmup_steps=int(budget.warmup), total_steps=budget.tokens // per_step,
                                       decay_fraction=fraction))
    return steps * per_step


def stage_work(budget: str, candidates: int, patterns: list[str], widths: str,
               below: str | None = None, growth: Growth = Growth(), known: dict[str, str] | None = None
               ) -> StageWork:
    """The work of ``candidates`` trained at ``lm`` budget ``budget`` (``below``: the budget of the rung under it,
    whose trunks a ``continues`` budget continues), each costing the mean of ``patterns``, each as the model the
    budget's target trains for it (``known``: pattern -> its known layout's name, in that layout's own rule; every
    pattern grown by the search's ``growth``)."""
    from search.lm import get_lm_budget

    spec = get_lm_budget(budget)
    start, runs, least = 0, spec.runs, 0
    if spec.confirms:  # one rate, the one the rungs chose: a run per seed
        runs = spec.seeds
    if spec.continues and below is not None:
        previous = get_lm_budget(below)
        if previous.keeps_trunk and (previous.seq_len, previous.batch_size) == (spec.seq_len, spec.batch_size):
            start, runs = min(_trunk_tokens(previous), spec.tokens), spec.seeds  # one rate: the trunk's
            if previous.keeps_lower_trunks:  # the chosen rate's trunk and up to every lower rate's: at most all
                least, runs = runs, runs + len(previous.lrs) - 1
    scored = ((spec.val_tokens or 65_536) + (spec.curve_points + (spec.schedule == "wsd")) * spec.curve_tokens)
    known = known or {}
    flops = [trained_flops_per_token(p, widths, spec.extrapolate_to, spec.seq_len, growth, known.get(p))
             for p in patterns]
    per_token = sum(flops) / len(flops) if flops and None not in flops else 1.0
    trained = spec.tokens // (spec.seq_len * spec.batch_size) * spec.seq_len * spec.batch_size  # whole steps
    return StageWork(candidates, runs, trained, start, scored, per_token, spec.extrapolate_to or widths, least)


class SearchEta:
    """The whole search's remaining work and the speed measured so far (the module docstring says how and what it
    assumes). One for a search, across its stages; ``plan`` is called at each stage's start."""

    def __init__(self, config=None, strategy=None, now: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.strategy = strategy
        self.now = now
        self.stages: list[StageWork] | None = None  # this stage's work, then every later stage's
        self.whole = False  # whether ``stages`` holds every stage left (a search ETA can be given)
        self.done_work = 0.0
        self.started: float | None = None  # when this process's first run began training
        self._run: tuple | None = None  # (stage, candidate, run) of the last report
        self._trained = 0  # tokens that run had trained at its last report
        self._pending = 0.0  # the held-out scoring of that run, done once the next one starts
        self.fixed_seconds = 0.0  # later work timed in seconds, not FLOPs: the recall probe (_after_rungs)

    def plan(self, index: int, stage_config, stage) -> None:
        """Stage ``index`` (its settings and its ``search.engine.Stage``) starts: what it and the later stages ask."""
        self.stages, self.whole, self.fixed_seconds = None, False, 0.0
        config = self.config or stage_config
        try:
            from search.engine import known_names

            patterns = [pattern for pattern, _ in stage.first] or [self._representative(config)]
            known = known_names(stage)  # sized in their own layouts at the target, as the rungs train them
            growth = getattr(config, "growth", None) or Growth()
            candidates = min(stage.trials, stage.space.size)
            name = getattr(self.strategy, "name", None)
            from search.fidelity import get_ladder, rung_budget

            ladder = get_ladder(config.budget) if name == "successive-halving" else None
            if ladder is not None and index < len(ladder.rungs):  # a rung (the probe and confirmation: below)
                works = []
                for j in range(index, len(ladder.rungs)):
                    if j > index:
                        floor = sum("known" in attrs for _, attrs in stage.first)  # the known layouts go on
                        if ladder.rungs[j].known == "best":
                            floor = min(floor, 1)
                        # recall asked for: up to keep more, those that can recall (successive_halving.recall_pool)
                        pool = ladder.rungs[j].keep if getattr(config, "recall_source", None) else 0
                        candidates = min(candidates, ladder.rungs[j].keep + pool + (floor if config.known else 0))
                    below = rung_budget(ladder, j - 1, config.target) if j else None
                    works.append(stage_work(rung_budget(ladder, j, config.target), candidates, patterns,
                                            config.widths, below, growth, known))
                works += self._after_rungs(config, ladder, candidates, patterns, known, growth)
                self.stages, self.whole = works, True
            else:
                count = self.strategy.stage_count(config) if self.strategy is not None else 1
                self.stages = [stage_work(stage_config.budget, candidates, patterns, stage_config.widths,
                                          growth=growth, known=known)]
                self.whole = index == count - 1  # the last stage: its time left is the search's
        except Exception:  # not an lm budget (a user's evaluator): the stage is estimated from its reports
            self.stages, self.whole = None, False

    def _after_rungs(self, config, ladder, finalists: int, patterns: list[str], known: dict[str, str],
                     growth: Growth) -> list[StageWork]:
        """What follows the rungs: the confirmation's runs (``--confirm-seeds``: the best new and the best known
        finalist, a run per further seed), and the recall probe of every finalist (``--min-recall`` on a ladder
        that probes) in ``fixed_seconds``: its models are not the rungs', so it is timed by its per-finalist
        figure (``PROBE_CORE_SECONDS``, as ``composer search --plan`` times it), not by the FLOP rate. The AMSD
        search's rungs said "search eta ~17 min" with the probe of 8 finalists and 4 confirmation runs, about 2
        hours, still to come."""
        works = []
        if getattr(config, "probes_recall", False):
            import torch

            self.fixed_seconds = finalists * PROBE_CORE_SECONDS / max(1, torch.get_num_threads())
        if getattr(config, "confirm_seeds", 1) > 1:
            from search.fidelity import rung_budget
            from search.lm import confirm_budget, get_lm_budget

            last = rung_budget(ladder, len(ladder.rungs) - 1, config.target)
            budget = confirm_budget(last, config.confirm_seeds - get_lm_budget(last).seeds)
            works.append(stage_work(budget, 2, patterns, config.widths, growth=growth, known=known))
        return works

    @staticmethod
    def _representative(config) -> str:
        """A pattern of the searched primitives in turn, for a stage that enqueues none (the mixers space's: its
        middle depth, each mixer with one MLP, ``MixerSpace.representative``)."""
        primitives = str(getattr(config, "primitives", "AM")) or "AM"
        layers = int(getattr(config, "layers", 6) or 6)
        if getattr(config, "space", "layers") == "mixers":
            from search.mixer_space import MixerSpace

            return MixerSpace(layers, primitives).representative
        return (primitives * layers)[:layers]

    def update(self, index: int, candidate: int, total: int, info: dict[str, Any]) -> tuple[float | None, float | None]:
        """Account one report of candidate ``candidate`` (from 1) of ``total`` in stage ``index``; returns the
        seconds left in the stage and in the whole search (None where they cannot be estimated)."""
        if self.stages is None:  # in tokens, from the report alone
            self.stages = [StageWork(total, int(info.get("runs") or 1), run_tokens(info) or 1)]
        work = self.stages[0]
        runs = int(info.get("runs") or work.runs)
        run = int(info.get("run") or 1)
        # a continued budget trains each kept rate from its trunk; a candidate without a trunk trains every rate afresh
        start = work.start_tokens if work.fewest_runs <= runs <= work.runs else 0
        length = max(1, (run_tokens(info) or work.budget_tokens) - start)
        trained = min(max(0, int(info.get("tokens") or 0) - start), length)
        per_token, scored = work.flops_per_token, FORWARD_SHARE * work.eval_tokens
        now = self.now()
        key = (index, candidate, run)
        if key != self._run:
            self.done_work += self._pending + per_token * trained
            self._pending = per_token * scored
            if self.started is None:
                speed = info.get("tokens_per_s")
                self.started = now - (trained / speed if speed else 0.0)
        else:
            self.done_work += per_token * max(0, trained - self._trained)
        self._run, self._trained = key, trained
        elapsed = now - self.started
        if elapsed <= 0 or self.done_work <= 0:
            return None, None
        speed = self.done_work / elapsed
        stage_left = (per_token * (length - trained + scored) + (runs - run) * per_token * (length + scored)
                      + max(0, work.candidates - candidate) * work.expected_runs * work.run_work)
        later = sum(stage.work for stage in self.stages[1:])
        return stage_left / speed, (stage_left + later) / speed + self.fixed_seconds if self.whole else None


class SearchProgress:
    """Prints one line per finished trial (an Optuna callback, or ``poll`` for worker processes), and with
    :meth:`heartbeat` (``LanguageModelEvaluator.heartbeat``) a line every ~10 s while a candidate trains."""

    def __init__(self, total: int, maximize: bool, label: str = "", stream=None, kind: str = "stage",
                 index: int = 0, eta: SearchEta | None = None, done: int = 0, every_s: float = EVERY_S,
                 now: Callable[[], float] = time.monotonic, promoted: frozenset[str] | None = None,
                 worker: int | None = None) -> None:
        self.total = total
        self.maximize = maximize
        self.label = label
        self.stream = stream if stream is not None else sys.stderr  # the one of now: a default bound at import
        # time kept writing to the stderr of whoever imported this module first (pytest's capture, say)
        self.started = time.time()
        self.seen: set[int] = set()
        self.done_before: int | None = None
        self.kind = kind  # what a stage is called in the heartbeat's ETA: "rung eta"
        self.index = index
        self.eta = eta if eta is not None else SearchEta(now=now)
        self.done = done  # candidates of this stage finished (stage_done): the one training is number done + 1
        self.promoted = promoted  # a rung's promoted patterns, the only candidates it numbers
        self.every_s = every_s
        self.now = now
        self.worker = worker  # a spawned worker's number: its lines name it instead of a candidate of the stage
        self._last: tuple[tuple, float] | None = None  # the last heartbeat line: its run and when
        self._broken = False

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._print(study, trial)

    def poll(self, study_loader) -> None:
        study = study_loader()
        for trial in study.get_trials(deepcopy=False, states=FINISHED):
            if trial.number not in self.seen:
                self._print(study, trial)

    def begin(self) -> None:
        """Says at once what the stage trains first, before its first report (a run's first comes ~10 s in); nothing
        for a stage that a resumed search finished before."""
        if self.done >= self.total:
            return
        work = (self.eta.stages or [None])[0]
        what = (f": {work.runs} run(s) of {work.budget_tokens - work.start_tokens:,} tokens"
                + (f" at {work.widths}" if work.widths else "") if work is not None else "")
        print(f"{self.label}[{self.done + 1:>3}/{self.total}] training{what}; a progress line every ~10 s",
              file=self.stream, flush=True)

    def heartbeat(self, info: dict[str, Any]) -> None:
        """A line for a training run's report (``composer.training.progress.Heartbeat``): at a run's first report,
        then at most every ``every_s``. Never raises: a progress line must not stop a candidate."""
        if self._broken:
            return
        try:
            self._heartbeat(info)
        except Exception as err:  # noqa: BLE001
            self._broken = True
            print(f"{self.label}(progress lines stopped: {type(err).__name__}: {err})", file=self.stream, flush=True)

    def _heartbeat(self, info: dict[str, Any]) -> None:
        if self.worker is None:
            candidate = self.done + 1
            stage_left, search_left = self.eta.update(self.index, candidate, self.total, info)
            key: tuple = (self.index, candidate, info.get("run"))
            head = f"[{candidate:>3}/{self.total}] {info.get('pattern', '?')}"
        else:  # which of the stage's candidates this is, and the search's time left, are the search process's to say
            stage_left = search_left = None
            key = (info.get("pattern"), info.get("seed"), info.get("run"))
            head = f"worker {self.worker}  {info.get('pattern', '?')}"
        now = self.now()
        if self._last is not None and self._last[0] == key and now - self._last[1] < self.every_s:
            return
        self._last = (key, now)
        parts = [f"{self.label}{head}"]
        if info.get("runs"):
            run = f"run {info.get('run', 1)}/{info['runs']}"
            parts.append(run + (f" lr {_rate(info['lr'])}" if info.get("lr") else ""))
        budget = run_tokens(info)
        parts.append(f"{int(info.get('tokens') or 0):,}/{budget:,} tokens" if budget else
                     f"{int(info.get('tokens') or 0):,} tokens")
        if info.get("tokens_per_s"):
            parts.append(f"{info['tokens_per_s']:,.0f} tok/s")
        if stage_left is not None:
            parts.append(f"{self.kind} eta {_clock(stage_left)}" if self.label else f"eta {_clock(stage_left)}")
        if search_left is not None and self.label:
            parts.append(f"search eta {_about(search_left)}")
        print("  ".join(parts), file=self.stream, flush=True)

    def _print(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.seen.add(trial.number)
        finished = study.get_trials(deepcopy=False, states=FINISHED)
        done = stage_done(finished, self.promoted)
        self.done = done
        if self.done_before is None:
            self.done_before = done - 1
        attrs = trial.user_attrs
        pattern = attrs.get("pattern", "?")
        if "fail_reason" in attrs or trial.state == TrialState.FAIL:
            outcome = f"failed: {attrs.get('fail_reason', 'unknown')}"[:60]
        elif "pruned_at" in attrs or trial.state == TrialState.PRUNED and "skip_reason" not in attrs:
            outcome = "pruned early"
        elif "skip_reason" in attrs:
            outcome = f"skipped: {attrs['skip_reason']}"[:60]
        else:
            outcome = f"score {trial.values[0]:.4f}" + (" (cached)" if "cached_from" in attrs else "") + (
                f" (trial {attrs['same_model_as']}'s model)" if "same_model_as" in attrs else "")
        complete = [t for t in finished if t.state == TrialState.COMPLETE
                    and not any(k in t.user_attrs for k in ("pruned_at", "skip_reason", "fail_reason"))]
        best = ""
        if complete:
            top = (max if self.maximize else min)(complete, key=lambda t: t.values[0])
            best = f"best {top.values[0]:.4f} {top.user_attrs.get('pattern', '')}"
        elapsed = time.time() - self.started
        new = max(1, done - self.done_before)
        eta = elapsed / new * max(0, self.total - done)
        print(f"{self.label}[{done:>3}/{self.total}] {pattern:<16} {outcome:<28} {best:<30} "
              f"elapsed {_clock(elapsed)} eta {_clock(eta)}", file=self.stream, flush=True)


def worker_heartbeat(label: str, total: int, worker: int) -> Callable[[dict[str, Any]], None]:
    """The heartbeat of spawned worker ``worker`` (numbered from 1 in its lines) of a stage of ``total`` candidates
    named ``label``: a module-level function, so ``functools.partial(worker_heartbeat, label, total)`` crosses the
    spawn to ``search.engine._worker_main``, which gives it the worker's number."""
    return SearchProgress(total, False, label, worker=worker + 1).heartbeat
