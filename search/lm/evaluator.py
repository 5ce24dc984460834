"""The ``lm`` evaluator: validation loss after a token budget of language modelling, at a rate that suits the pattern.

Why a grid of learning rates per candidate: with one shared rate a proxy ranks how well each pattern tolerates
that rate, not the pattern (``docs/recall.md``: one rate turned attention's recall from 1.00 into 0.02;
``docs/evidence.md``: the matched Llama went from unstable to best once it had its own rate). Every candidate
therefore trains once at each rate of its budget's ``lrs``, at the first seed; the rate with the lowest validation
loss is its rate (a diverged rate is recorded and never chosen; a tie goes to the lower rate), and any further
``seeds`` train at that rate. The score is the mean validation loss over the seeds at the chosen rate, and
``details`` keeps ``lr`` (carried into ``composer transfer`` and ``composer pipeline`` as the pattern's starting
rate), every rate's loss (``lr_sweep``) and every seed's loss (``losses``).

A budget may train at other widths than the search's: ``extrapolate_to`` grows the searched pattern to a preset
with the project's extrapolator (stacking a 6-layer pattern to ``demo-4m``'s size, as ``composer transfer`` does),
so the later rungs of a successive-halving search (``search.fidelity``) rank their candidates at the target's shape.

Every run scores the same held-out text: the validation split does not depend on the training seed.
"""
from __future__ import annotations

import contextlib
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.errors import ComposerRunError, ConfigError
from composer.precision import AUTOCAST_PRECISIONS, parse_precision
from search.evaluation import Evaluation, Report, best_rate
from search.growth import GROWN, Grown, Growth
from search.lm.budgets import BudgetName, LMBudget, get_lm_budget
from search.trunks import TrunkStore


@dataclass(frozen=True)
class Run:
    """One training run of a candidate: final validation loss (None: diverged), training tokens/s, its curve, and
    under a shared-trunk schedule the trunk checkpoint it leaves and where it started and ended."""

    loss: float | None
    tokens_per_s: float | None
    curve: list[dict[str, Any]] | None = None
    trunk: Path | None = None
    trunk_tokens: int | None = None
    trained_tokens: int | None = None
    continued_from_tokens: int | None = None
    model_dir: Path | None = None  # the model composer train exported (gone once the evaluation ends)


def as_run(result: Run | tuple) -> Run:
    """A ``Run`` from ``train_once``'s result (a stand-in may return the plain ``(loss, tokens_per_s)`` pair)."""
    return result if isinstance(result, Run) else Run(*result)


@contextlib.contextmanager
def quiet_lightning():
    """Lightning's info lines ("Using bfloat16 Automatic Mixed Precision", "Restoring states from the checkpoint",
    "`Trainer.fit` stopped") silenced while a candidate trains; its warnings and errors still show."""
    import logging

    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric", "lightning")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


# checkpoints spread over a trunk in training (TrunkStore.running): a search killed during a candidate loses at most
# an eighth of the trunk's steps (on the CPU ladder's last rung, about 2 of its 20 minutes), for 8 saves of ~60 MB
TRUNK_SAVES = 8


def interrupted_message(pattern: str, continues: bool = False) -> str:
    """What a search stopped during a candidate tells the user: how to resume the search. Training's own hint (a
    checkpoint and ``--resume``) would name the candidate's temporary directory and a flag ``composer search``
    does not take."""
    return (f"composer search stopped while training candidate {pattern}; to resume it, re-run the same command "
            "with the same --out: finished candidates are kept in its study, this one "
            + ("continues from its trunk's last checkpoint" if continues else "trains again from its start"))


def checked_source(data: str | None, text_field: str = "text", tokenizer: str | None = None) -> str | None:
    """``data``, once it resolves to a source with text in ``text_field`` and ``tokenizer`` loads
    (``composer.data.checks.check_data``): a local path that does not exist (or a directory without data files,
    issue 34), JSON records without the field (issue 47), a source without text or a tokenizer that does not load
    (issue 61) is one ``DataError`` here, when the search builds its evaluator, before its --out, study or W&B run
    exists, instead of the same error in every candidate's training. Cheap: one record of a local file is read, and a
    Hugging Face dataset name passes offline (it is loaded when a candidate trains)."""
    from composer.data.checks import check_data

    check_data(data, text_field, tokenizer)
    return data


class LanguageModelEvaluator:
    """Validation loss of the pattern after the budget's tokens on ``data``, at the best of the budget's rates."""

    name = "lm"
    direction = "minimize"

    def __init__(self, budget: str | LMBudget = "cpu", widths: str = "search-1m", data: str | None = None,
                 tokenizer: str | None = None, precision: str = "auto", compile: bool = False,
                 trunks: str | Path | None = None, known: dict[str, str] | None = None,
                 chosen_rates: dict[str, float] | None = None, growth: Growth | None = None,
                 text_field: str = "text") -> None:
        from composer.training import TrainConfig
        from composer.training.run import resolve_precision

        self.spec = get_lm_budget(budget)
        precision = parse_precision(precision, AUTOCAST_PRECISIONS, flag="precision")  # fp32 weights, autocast at most
        self.budget = self.spec.name
        self.widths = self.spec.extrapolate_to or widths  # where it trains: the target's widths on a last rung
        self.data = checked_source(data, text_field, tokenizer)
        self.text_field = text_field  # the column of --data's records that holds the text
        self.tokenizer = tokenizer
        resolved = resolve_precision(TrainConfig(precision=precision))
        self.precision = "bf16" if resolved.startswith("bf16") else "fp32"
        self.compile = compile
        self.trunks = TrunkStore(trunks)  # a search's --out/trunks: what a later rung continues
        self._work: str | None = None  # an evaluation's scratch directory (its runs' trunks live there until chosen)
        # called with a run's progress every few seconds while it trains (composer.training.progress.Heartbeat): a
        # search sets it to print where it is between candidates' results
        self.heartbeat: Callable[[dict[str, Any]], None] | None = None
        # called with (pattern, lr, seed) before each run: Lightning callbacks of the caller's for that run (a
        # benchmark's per-layer diagnostics, composer.training.diagnostics), beside the run's own
        self.run_callbacks: Callable[[str, float, int], list[Any]] | None = None
        self._run_context: dict[str, Any] = {}
        self.known = dict(known or {})  # searched pattern -> published family: trained in its own layout at a target
        self._running: list[Path] = []  # this candidate's trunks in training (TrunkStore.running): gone once it scores
        # searched pattern -> the rate the rungs chose for it, recorded with its promotion: a confirmation, and a rung
        # that continues a trunk, train there even where the kept trunks that also say it are gone (deleted to free
        # disk, or the study moved)
        self.chosen_rates = dict(chosen_rates or {})
        self.growth = growth or Growth()  # how a pattern becomes its model at extrapolate_to (the search's rule)
        self._grown: dict[str, Grown] = {}  # searched pattern -> its model at extrapolate_to (grown)
        self._held_out = None  # composer.evaluation.loading.HeldOutCache: recall's held-out text, read once

    def grown(self, pattern: str) -> Grown | None:
        """The model this budget trains for ``pattern``: the one it grows to at ``extrapolate_to`` under the
        search's rule (``search.growth``: stacked, its attention kept, a known family in its own layout, at a depth
        by width or at equal cost), made once per pattern; None where the budget trains the pattern itself at the
        search's widths."""
        if self.spec.extrapolate_to is None:
            return None
        if pattern not in self._grown:  # growing a pattern costs ~0.1 s; the engine asks for every trial
            self._grown[pattern] = self.growth.grow(pattern, self.spec.extrapolate_to, self.known.get(pattern))
        return self._grown[pattern]

    def widths_of(self, trained: str) -> str:
        """The preset a trained layout trains at: the target's, or the widths it grew to (``demo-4m:d280`` at a
        depth, by width) where a pattern this evaluator grew became it."""
        return next((grown.widths for grown in self._grown.values() if grown.layout == trained), self.widths)

    def model_key(self, pattern: str) -> str:
        """The model this evaluator trains for ``pattern`` (:meth:`grown`), as the engine compares models: two
        6-layer patterns grown to one model at the target (``SADDSM`` and ``SDDASM`` both become
        ``SDDSMSDDSMASDDSMSDDSM`` with their attention kept) are trained once and share its score
        (``search.engine.trial_of_same_model``); the AMSD search trained that model twice at rung 1 and twice
        again at rung 2 before this."""
        grown = self.grown(pattern)
        return pattern if grown is None else grown.layout

    def train_config(self, pattern: str, lr: float, seed: int, out: str):
        """The ``composer train`` settings of one of the candidate's runs."""
        from composer.training import TrainConfig

        spec = self.spec
        optional = {"warmup": spec.warmup} if spec.warmup is not None else {}
        return TrainConfig(
            arch=pattern, preset=self.widths_of(pattern), data=self.data, text_field=self.text_field, tokenizer=self.tokenizer,
            tokens=spec.tokens,
            seq_len=spec.seq_len, batch_size=spec.batch_size, lr=lr, seed=seed, wandb="off", out=out,
            val_batches=20, val_tokens=spec.val_tokens, log_interval=10**9, checkpoint_interval=10**9,
            keep_checkpoints=1, precision=self.precision, compile=self.compile, progress=False,
            schedule=spec.schedule, curve_points=spec.curve_points, curve_tokens=spec.curve_tokens, **optional,
        )

    def train_once(self, pattern: str, lr: float, seed: int) -> Run:
        """One run: its final validation loss (None when it diverged), training tokens/s, curve and (wsd) the
        trunk it leaves, continued from the candidate's stored trunk at this rate when the budget ``continues``."""
        from composer.training import train
        from composer.training.continuation import train_continued, trunk_steps

        callbacks = []
        if self.heartbeat is not None:
            from composer.training.progress import Heartbeat

            callbacks.append(Heartbeat(self.heartbeat, context={
                "pattern": pattern, "lr": lr, "seed": seed, "budget": self.spec.name,
                "budget_tokens": self.spec.tokens, "tokens_per_step": self.spec.seq_len * self.spec.batch_size,
                **self._run_context}))
        if self.run_callbacks is not None:
            callbacks.extend(self.run_callbacks(pattern, lr, seed))
        with contextlib.ExitStack() as stack:
            stack.enter_context(quiet_lightning())  # the search prints where it is; Lightning's notes would bury it
            work = self._work or stack.enter_context(tempfile.TemporaryDirectory(prefix="composer-lm-eval-"))
            out = tempfile.mkdtemp(prefix=f"run-{lr:g}-{seed}-", dir=work)
            config = self.train_config(pattern, lr, seed, out)
            try:
                if self.spec.keeps_trunk or self.spec.continues:  # checked: wsd, warmup in steps
                    key = self.trunk_key(pattern, lr, seed)
                    start = self.trunks.find(key, trunk_steps(config)) if self.spec.continues else None
                    running = self.trunks.running(key, trunk_steps(config))  # outlives a kill, unlike `work`
                    if running is not None:
                        self._running.append(running)
                    branch = train_continued(config, out, start_from=start, callbacks=callbacks, trunk_dir=running,
                                             trunk_saves=TRUNK_SAVES)
                    summary = branch.summary
                    extra = {"trunk": branch.trunk, "trunk_tokens": branch.trunk_step * config.batch_size
                             * config.seq_len, "trained_tokens": branch.trained_tokens,
                             "continued_from_tokens": branch.started_from_step * config.batch_size * config.seq_len}
                else:  # one run: nothing is continued from it, so no trunk to split off and save
                    summary = train(config, save_on_sigterm=False, callbacks=callbacks)  # its directory goes with it
                    extra = {"trained_tokens": summary.get("tokens")}
                    if config.schedule == "wsd" and config.warmup >= 1:
                        extra["trunk_tokens"] = trunk_steps(config) * config.batch_size * config.seq_len
            except ComposerRunError as err:
                if "diverged" in str(err):
                    return Run(None, None)
                raise
        loss = summary["val_loss"]
        model_dir = Path(summary["model_dir"]) if summary.get("model_dir") else None
        return Run(loss if loss is not None and math.isfinite(loss) else None, summary.get("tokens_per_s"),
                   curve=summary.get("curve"), model_dir=model_dir, **extra)

    def _measure_recall(self, at_rate: dict[int, Run]) -> dict[str, Any]:
        """The trained models' recall where the budget asks for it (``recall_sequences``): each seed's compact
        report (``details["recall"]``) and their figure (``details["trained_recall"]``, ``search.trained_recall``).
        Runs without an exported model (diverged, or a stand-in's) are not measured; a held-out split too small to
        measure on is recorded as the reason instead, the loss still scores the candidate."""
        if not self.spec.recall_sequences:
            return {}
        from composer.evaluation.loading import HeldOutCache
        from search.trained_recall import PER_SEED, SUMMARY, measure_run, seed_averaged

        if self._held_out is None:
            self._held_out = HeldOutCache()  # the same text for every seed and candidate: read once
        reports = {}
        try:
            for seed, run in at_rate.items():
                if run.loss is not None and run.model_dir is not None:
                    reports[str(seed)] = measure_run(run.model_dir, self.spec.seq_len, self.spec.recall_sequences,
                                                     self._held_out)
        except ConfigError as err:
            return {f"{SUMMARY}_error": str(err)}
        if not reports:
            return {}
        return {PER_SEED: reports, SUMMARY: seed_averaged(reports)}

    @staticmethod
    def _past_edge(lr: float | None, rates: tuple[float, ...]) -> float | None:
        """One rate past the grid's edge when ``lr`` is at it (twice the highest, half the lowest), else None."""
        if lr is None or len(rates) < 2:
            return None
        if lr == max(rates):
            return 2 * lr
        if lr == min(rates):
            return lr / 2
        return None

    def trunk_key(self, trained: str, lr: float, seed: int) -> dict[str, Any]:
        """Everything that makes two runs' trunks the same run, whatever their token budgets."""
        spec = self.spec
        return {"pattern": trained, "widths": self.widths_of(trained), "data": self.data, "tokenizer": self.tokenizer,
                "seq_len": spec.seq_len, "batch_size": spec.batch_size, "warmup": spec.warmup, "lr": lr,
                "seed": seed, "precision": self.precision, "compile": self.compile,
                **({"text_field": self.text_field} if self.text_field != "text" else {})}  # default: keys as before

    def __call__(self, pattern: str, seed: int, report: Report) -> Evaluation:
        """The candidate's evaluation; stopped mid-training, it says how to resume the search before it exits and
        leaves its trunks in training for the resumed search to continue; otherwise (scored, or failed) they go."""
        self._running = []
        try:
            evaluation = self._evaluate(pattern, seed)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C (Lightning makes it exit 1) or SIGTERM (143) mid-training
            print(interrupted_message(pattern, bool(self._running)), file=sys.stderr, flush=True)
            raise
        except BaseException:
            self.trunks.discard_running(self._running)
            raise
        self.trunks.discard_running(self._running)
        return evaluation

    def _rates_to_keep(self, chosen: float, sweep: dict[float, float | None]) -> list[float]:
        """The rates whose trunks a ``keeps_trunk`` budget saves for the next rung: the chosen one, and with
        ``keeps_lower_trunks`` every lower rate of the sweep that did not diverge (the next rung trains longer,
        where the better rate is lower: it continues each and chooses among them)."""
        if not self.spec.keeps_trunk:
            return []
        lower = [rate for rate, loss in sweep.items() if rate < chosen and loss is not None and math.isfinite(loss)]
        return [chosen, *sorted(lower)] if self.spec.keeps_lower_trunks else [chosen]

    def _evaluate(self, pattern: str, seed: int) -> Evaluation:
        """Every rate at the first seed, further seeds at the chosen rate (the module docstring says why); a budget
        that ``continues`` trains only the rates whose trunks an earlier rung kept for this candidate."""
        from search.mad import CandidateFailed

        started = time.perf_counter()
        grown = self.grown(pattern)
        trained = pattern if grown is None else grown.layout
        rates = self.spec.lrs
        continued = False
        if self.spec.confirms:  # the rate the rungs chose for this candidate: recorded, else kept with its trunk
            chosen = self.chosen_rates.get(pattern)
            rung_seed = seed - get_lm_budget(BudgetName.parse(self.spec.name).confirmed).seeds
            rates = ((chosen,) if chosen else tuple(self.trunks.rates(self.trunk_key(trained, 0.0, rung_seed)))) or rates
        from_scratch = False
        if self.spec.continues:
            kept = tuple(lr for lr in self.trunks.rates(self.trunk_key(trained, 0.0, seed)))
            if kept:
                rates, continued = kept, True
            elif self.chosen_rates.get(pattern):
                # its trunk is gone (deleted, or another --out): the same run from scratch at the rate the rung below
                # chose, not a fresh choice among the budget's rates on the tokens that score it, which would rank
                # it by another procedure (and an optimistic minimum) beside the continued candidates
                rates, from_scratch = (self.chosen_rates[pattern],), True
        with tempfile.TemporaryDirectory(prefix="composer-lm-eval-") as work:
            self._work = work
            try:
                total = len(rates) + self.spec.seeds - 1
                runs = {}
                for number, rate in enumerate(rates, start=1):
                    self._run_context = {"run": number, "runs": total}
                    runs[rate] = as_run(self.train_once(trained, rate, seed))
                sweep = {lr: run.loss for lr, run in runs.items()}
                lr = best_rate(sweep)  # the project's one chooser
                extended = self._past_edge(lr, rates) if self.spec.extend_edge else None
                if extended is not None:
                    self._run_context = {"run": len(rates) + 1, "runs": total + 1}
                    runs[extended] = as_run(self.train_once(trained, extended, seed))
                    sweep[extended] = runs[extended].loss
                    lr = best_rate(sweep)
                if lr is None:
                    listed = ", ".join(f"{rate:g}" for rate in sweep)
                    raise CandidateFailed(f"training diverged at every learning rate ({listed})")
                for rate in self._rates_to_keep(lr, sweep):
                    if runs[rate].trunk is not None:
                        self.trunks.keep(self.trunk_key(trained, rate, seed), runs[rate].trunk)
                at_rate = {seed: runs[lr]}
                for number, extra in enumerate(range(seed + 1, seed + self.spec.seeds), start=len(rates) + 1):
                    self._run_context = {"run": number, "runs": total}
                    at_rate[extra] = as_run(self.train_once(trained, lr, extra))
                losses = {s: run.loss for s, run in at_rate.items()}
                recall = self._measure_recall(at_rate)  # while the runs' models are still on disk
            finally:
                self._work, self._run_context = None, {}
        finite = [loss for loss in losses.values() if loss is not None]
        if len(finite) < len(losses):
            raise CandidateFailed(f"training diverged at lr {lr:g} for seed(s) "
                                  f"{', '.join(str(s) for s, v in losses.items() if v is None)}")
        score = math.fsum(finite) / len(finite)
        chosen = runs[lr]
        details: dict[str, Any] = {
            "lr": lr, "val_ppl": math.exp(score), "tokens_per_s": chosen.tokens_per_s,
            "tokens": self.spec.tokens, "widths": self.widths_of(trained),
            "trained_tokens": sum(run.trained_tokens or 0 for run in runs.values()),
        }
        if chosen.curve:
            details["curve"] = chosen.curve
        if chosen.trunk_tokens is not None:
            details["trunk_tokens"] = chosen.trunk_tokens
        if continued:
            details["continued_from_tokens"] = chosen.continued_from_tokens
        if from_scratch:
            details["trunk_missing"] = "trained from scratch at the rate the rung below chose"
        if len(sweep) > 1:
            details["lr_sweep"] = {f"{rate:g}": loss for rate, loss in sorted(sweep.items())}
            if (len(sweep) > 2 or extended is not None) and lr in (min(sweep), max(sweep)):
                details["lr_at_edge"] = True
        if extended is not None:
            details["lr_extended"] = extended
        details["losses"] = {str(s): v for s, v in losses.items()}  # every seed, one or more (search.evidence_record)
        details.update(recall)
        if grown is not None:  # the model it trained, whole (search.growth.GROWN)
            details[GROWN] = grown.record()
        return Evaluation(score=score, details=details, seconds=time.perf_counter() - started)
