"""Recall at length: Zoology's multi-query associative recall (MQAR) over sequence lengths up to 1,024 and more.

Hybrids exist because a fixed-size state cannot hold an unbounded context: attention keeps every token (a KV
cache growing with the length), Mamba-2 and Gated DeltaNet a fixed state, sliding-window attention a bounded
window. MAD's recall tasks run at 32-128 tokens, where every pattern's cache is small and the difference does not
show. Here a pattern is trained and tested on MQAR (``search.mad.tasks.generate_mqar``) at each length of a list,
with the number of key-value pairs growing with the length (``length // kv_ratio``, Zoology scales it the same
way), so that what must be remembered outgrows a fixed state while attention still sees it all.

As an evaluator (``composer search --evaluator recall``) the score is the mean test accuracy over the lengths
(higher is better), and ``details["accuracy_by_length"]`` keeps each one; the mixture protocol also keeps, per
length, the test queries, the test sequences they come in and the sd of the sequences' accuracies
(``test_queries``, ``test_sequences``, ``sequence_accuracy_sd``), from which ``search.tradeoffs`` reads an
interval over the test sequences. One training seed: that interval is the test sample's noise, not a seed's. Beside ``--objectives score,kv`` the
Pareto front is recall against KV cache. Patterns train at the search widths (default ``search-1m``: d_model 128,
a 64-token sliding window). By default one model trains on a mixture of all the lengths and is tested at each
(Zoology's protocol, ``search.recall_mixture``: what is learnt at short lengths carries to long ones, so a long
length measures capacity rather than learning speed); ``mixture=False`` trains each length on its own (MAD's
protocol, one task per length, ``search.mad.evaluate_pattern``).

A budget with several learning rates (``lrs``) trains every candidate at each and scores it at the rate whose run
ends with the lowest training loss (``lowest_final_loss``; never chosen by the test queries it is scored on), so a
pattern is not ranked by how well one shared rate suits it: at 3e-3 a Mamba-2 layer under attention never leaves
chance where 1e-3 teaches it (docs/recall.md). ``details`` keeps the chosen ``lr`` and each rate's ``lr_sweep``
point; a rate that diverges is recorded there and the candidate fails only if every rate does. The per-length
protocol hands the rates to MAD, which keeps each task's best cell.

Budgets (``RECALL_BUDGETS``; measured accuracies and times in docs/recall.md):

* ``smoke``: lengths 64 and 128 (4 and 8 pairs), 60 steps each: under a minute per candidate on 2 CPU cores;
  checks the plumbing, its accuracies are near chance.
* ``cpu``: lengths 64, 256, 1024 (4, 16, 64 pairs), vocabulary 256, 4,000 steps of 1,024 tokens per length
  (12,000 in all), at lr 1e-3 and 3e-3: about 10-15 minutes per 2-layer pattern and rate on one CPU core. MQAR
  is learnt late: fewer steps leave attention on the plateau where it picks one of the context's values at
  random (accuracy 1 / pairs).
* ``probe`` / ``probe-smoke``: a search's finalists' probe (``--min-recall``): the pattern's mixers alone
  (``mixer_stack``) behind a token-shift stem (``search.mad.models.ShiftStemLM``), lengths 64-1,024, 1,000 steps
  each at lr 1e-3 (Mamba-2 layers at 3e-5), 6-12 minutes per pattern on one core (``probe-smoke``: a plumbing
  check). docs/reports/recall-probe-2026-11-27.md, says what it separates (attention from none, in 2
  seeds, Nemotron-H's Mamba-2 hybrid included) and what it cannot see (Mamba-2's own recall: it barely trains).
* ``gpu``: Zoology's scale: lengths 64 to 2,048, vocabulary 8,192, 20,000 training sequences per length,
  4 epochs (at least 1,000 steps) of 65,536 tokens, at lr 3e-4, 1e-3 and 3e-3.

Every step holds the same number of tokens at every length (``tokens_per_step``; the batch is
``tokens_per_step // length`` sequences), hence the same number of queries, so longer lengths are not trained on
more examples. Each length's data has its own seed (``seed * 1000 + index``); the data of a length depends only on
the seed and the length, never on the pattern.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from composer.errors import ConfigError
from search.evaluation import Evaluation, Report, best_rate, checked_rates

DEFAULT_KV_RATIO = 16  # one key-value pair per 16 tokens: 4 pairs at 64 tokens, 64 at 1,024


@dataclass(frozen=True)
class RecallBudget:
    """The lengths, the pairs per length and how long each length trains."""

    name: str
    lengths: tuple[int, ...]
    kv_ratio: int = DEFAULT_KV_RATIO
    vocab_size: int = 256
    train_examples: int = 4000  # per length, at least enough for one pass of the steps
    test_examples: int = 256
    steps: int | None = 400
    epochs: float | None = None
    min_steps: int = 0
    tokens_per_step: int = 4096  # batch = tokens_per_step // length: every length sees as many queries per step
    lrs: tuple[float, ...] = (3e-3,)  # several: each candidate trains at each, keeps the lowest final training loss
    mixture: bool = True  # Zoology's protocol: one model trained on every length (search.recall_mixture)
    # train the pattern's sequence mixers alone, its feed-forward layers dropped (``mixer_stack``): recall is the
    # mixers' job, and with MLPs between them a 6-layer model stayed on MQAR's plateau within a CPU budget
    mixers_only: bool = False
    # the probe's token-shift stem (``search.mad.models.ShiftStemLM``): each position also sees its predecessor's
    # embedding, so attention needs no previous-token head before it can look a key up (docs/recall.md)
    shift_stem: bool = False
    # some primitives' layers trained at a multiple of the rate, as ``(("S", 0.03),)``: at the shared rate a Mamba-2
    # layer below attention kept the attention from learning the lookup; at 0.03 of it, or frozen, it did not
    # (docs/recall.md). A budget of the probe's, read by the mixture protocol only
    rate_scales: tuple[tuple[str, float], ...] = ()
    # per-primitive options over the widths preset's, as ``{"W": {"window": 2048}}`` (the mixture protocol reads
    # them): the probe asks what a layout recalls as deployed, and search-1m's 64-token window is not Samba's
    primitive_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        lengths = tuple(self.lengths)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "lrs", checked_rates(self.lrs, "recall lrs"))
        if not lengths or any(not isinstance(n, int) or n < 4 or n % 2 for n in lengths):
            raise ConfigError(f"recall lengths must be even integers >= 4, got {list(lengths)}")
        if not isinstance(self.kv_ratio, int) or self.kv_ratio < 4:
            raise ConfigError(f"kv_ratio must be an integer >= 4 (a pair and its query need 4 tokens), got "
                              f"{self.kv_ratio!r}")
        try:
            scales = tuple((str(k), float(v)) for k, v in dict(self.rate_scales).items())
        except (TypeError, ValueError):
            scales = ()
        if not scales and self.rate_scales or any(not (math.isfinite(v) and v > 0) for _, v in scales):
            raise ConfigError(f"rate_scales must be (primitive, positive multiple of the rate) pairs such as "
                              f"(('S', 0.03),), got {self.rate_scales!r}")
        object.__setattr__(self, "rate_scales", scales)
        if not isinstance(self.primitive_options, dict) or not all(
                isinstance(v, dict) for v in self.primitive_options.values()):
            raise ConfigError(f"primitive_options maps a primitive to its options, as {{'W': {{'window': 2048}}}}; "
                              f"got {self.primitive_options!r}")
        if (self.shift_stem or self.rate_scales or self.primitive_options) and not self.mixture:
            raise ConfigError("the token-shift stem, rate_scales and primitive_options are trained under the mixture "
                              "protocol only: "
                              "set mixture=True, or drop them")
        for n in lengths:
            if n // self.kv_ratio < 1:
                raise ConfigError(f"length {n} holds no key-value pair at kv_ratio {self.kv_ratio}: use lengths >= "
                                  f"{self.kv_ratio}")
            if n // self.kv_ratio > self.vocab_size // 2 - 1:
                raise ConfigError(f"length {n} needs {n // self.kv_ratio} distinct keys but vocab_size "
                                  f"{self.vocab_size} has {self.vocab_size // 2 - 1}: raise vocab_size")

    def kv_pairs(self, length: int) -> int:
        return length // self.kv_ratio

    def batch_size(self, length: int) -> int:
        return max(1, self.tokens_per_step // length)

    def task(self, length: int):
        from search.mad.tasks import TaskConfig

        examples = max(self.train_examples, (self.steps or 0) * self.batch_size(length))
        return TaskConfig("multi-query-associative-recall", seq_len=length, num_kv_pairs=self.kv_pairs(length),
                          vocab_size=self.vocab_size, num_train_examples=examples,
                          num_test_examples=self.test_examples)

    def mad_budget(self, length: int):
        """Training at ``length`` as a ``search.mad`` budget (its optimiser, schedule and precision handling)."""
        from search.mad.evaluate import Budget

        return Budget(name=f"recall-{self.name}", tasks=(self.task(length),), steps=self.steps, epochs=self.epochs,
                      min_steps=self.min_steps, batch_size=self.batch_size(length), lrs=self.lrs,
                      eval_batch_size=max(1, 4 * self.batch_size(length)), description=self.description)

    def replace(self, **changes) -> RecallBudget:
        import dataclasses

        return dataclasses.replace(self, **changes)


RECALL_BUDGETS: dict[str, RecallBudget] = {
    budget.name: budget
    for budget in (
        RecallBudget("smoke", lengths=(64, 128), train_examples=1000, test_examples=128, steps=60,
                     description="plumbing check: lengths 64 and 128, under a minute per candidate on 2 CPU cores"),
        # 4,000 steps: a 2-layer attention model is still at its 1/4 plateau after 1,500 steps; 1,024 tokens per
        # step keep 4,000 steps around 10 minutes per 2-layer pattern and rate on one CPU core. Two rates: at 3e-3
        # alone attention scored 0.02 at 1,024 tokens and Mamba-2 under attention stayed at chance, where 1e-3
        # teaches both (docs/recall.md), so one shared rate would rank the rate's fit, not the layout
        RecallBudget("cpu", lengths=(64, 256, 1024), steps=4000, tokens_per_step=1024, lrs=(1e-3, 3e-3),
                     description="lengths 64, 256, 1,024 (4, 16, 64 pairs), 4,000 steps of 1,024 tokens each, "
                     "at lr 1e-3 and 3e-3"),
        # the probe of a search's finalists (issue 37): their mixers alone, at the one rate that taught attention
        # every length in the cpu sweep, behind the token-shift stem. Without the stem, 4,000 steps ranked how fast
        # attention builds a previous-token head (AAA 0.16 at 1,024 tokens, DDA 1.00) in 19-37 minutes; with it
        # AAA recalls every pair after 1,000. Mamba-2 at the shared rate kept the attention above it from learning
        # (SSAS at chance in 2 seeds; SA frozen or at 0.1x learns; SSAS at 0.1x in 1 seed of 2, at 0.03x in both):
        # docs/reports/recall-probe-2026-11-27.md
        # W at Samba's deployed window (2,048): it then covers the probe's 1,024 tokens as it does at deployment,
        # where search-1m's 64-token window would fail Samba for a window it does not have (docs/recall.md)
        RecallBudget("probe", lengths=(64, 256, 1024), steps=1000, tokens_per_step=1024, lrs=(1e-3,),
                     mixers_only=True, shift_stem=True, rate_scales=(("S", 0.03),),
                     primitive_options={"W": {"window": 2048}},
                     description="the pattern's mixers without its MLPs behind a token-shift stem, lengths 64, 256, "
                     "1,024, 1,000 steps of 1,024 tokens each, lr 1e-3 (Mamba-2 layers 3e-5)"),
        RecallBudget("probe-smoke", lengths=(64, 128), train_examples=500, test_examples=64, steps=30,
                     tokens_per_step=1024, mixers_only=True, shift_stem=True, rate_scales=(("S", 0.03),),
                     description="plumbing check of the finalists' probe: mixers alone, lengths 64 and 128"),
        RecallBudget("gpu", lengths=(64, 128, 256, 512, 1024, 2048), vocab_size=8192, train_examples=20_000,
                     test_examples=1000, steps=None, epochs=4, min_steps=1000, tokens_per_step=65_536,
                     lrs=(3e-4, 1e-3, 3e-3),
                     description="Zoology's scale: vocab 8,192, 20,000 sequences per length, lengths to 2,048, "
                     "lr 3e-4, 1e-3 and 3e-3 (Zoology sweeps each model's rate too)"),
    )
}


def parse_lengths(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"64,128,256"`` or a sequence of ints -> a tuple of lengths."""
    if isinstance(text, str):
        try:
            return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
        except ValueError:
            raise ConfigError(f"lengths must be comma-separated integers such as 64,128,256, got {text!r}") from None
    return tuple(text)


def get_recall_budget(budget: str | RecallBudget) -> RecallBudget:
    if isinstance(budget, RecallBudget):
        return budget
    try:
        return RECALL_BUDGETS[budget]
    except KeyError:
        raise ConfigError(f"unknown recall budget {budget!r}; choose one of: {', '.join(RECALL_BUDGETS)}") from None


class RecallEvaluator:
    """Mean MQAR test accuracy over the budget's lengths, at the search widths (see the module docstring)."""

    name = "recall"
    direction = "maximize"

    def __init__(self, budget: str | RecallBudget = "cpu", widths: str = "search-1m", precision: str = "auto",
                 compile: bool = False, lengths: str | Sequence[int] | None = None,
                 kv_ratio: int | None = None) -> None:
        import torch

        from search.mad.evaluate import resolve_precision

        spec = get_recall_budget(budget)
        changes = {}
        if lengths is not None:
            changes["lengths"] = parse_lengths(lengths)
        if kv_ratio is not None:
            changes["kv_ratio"] = kv_ratio
        self.spec = spec.replace(**changes) if changes else spec
        self.budget = self.spec.name
        self.widths = widths
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.precision = resolve_precision(precision, device)
        self.compile = compile
        # a search's progress lines (search.progress.SearchProgress.heartbeat), given the mixture's tokens as they
        # train: the probe of 8 finalists, 10-20 minutes each on the CPU, ran without a line
        self.heartbeat: Callable[[dict[str, Any]], None] | None = None

    def model_key(self, pattern: str) -> str:
        """What this evaluator trains for ``pattern``: its mixers alone under ``mixers_only``, so patterns that
        differ only in where their MLPs sit (``SDDMDM`` and ``SMDDDM`` are both ``SDDD``) train one model and the
        search probes it once (``search.engine.trial_of_same_model``)."""
        return mixer_stack(pattern, self.widths) if self.spec.mixers_only else pattern

    def __call__(self, pattern: str, seed: int, report: Report) -> Evaluation:
        if self.spec.mixers_only:
            mixers = mixer_stack(pattern, self.widths)
            if not mixers:  # nothing keeps a token past its position: nothing can recall
                return Evaluation(score=0.0, details={"mixers": "", "note": "no sequence mixer: no recall"})
            result = self._evaluate(mixers, seed, report)
            return Evaluation(score=result.score, seconds=result.seconds, details={**result.details, "mixers": mixers})
        return self._evaluate(pattern, seed, report)

    def _evaluate(self, pattern: str, seed: int, report: Report) -> Evaluation:
        if self.spec.mixture:
            return self._on_mixture(pattern, seed, report)
        from search.mad import evaluate_pattern

        by_length: dict[str, float] = {}
        seconds = 0.0
        for index, length in enumerate(self.spec.lengths):  # one budget per length: its own batch size
            budget = self.spec.mad_budget(length)
            result = evaluate_pattern(pattern, widths=self.widths, tasks=budget.tasks, budget=budget,
                                      seed=seed * 1_000 + index, precision=self.precision, compile=self.compile)
            by_length[str(length)] = result.score
            seconds += result.seconds
            if report is not None:
                report(index, sum(by_length.values()) / len(by_length))
        return Evaluation(score=sum(by_length.values()) / len(by_length), seconds=seconds,
                          details={"accuracy_by_length": by_length, "protocol": "per-length",
                                   "kv_pairs": {str(n): self.spec.kv_pairs(n) for n in self.spec.lengths}})

    def _reporter(self, pattern: str, lr: float, seed: int, run: int) -> Callable[[int, int], None] | None:
        """``train_on_mixture``'s ``on_progress`` for :attr:`heartbeat`: a report as a training run's, so the
        search's line names the pattern, its run and rate, its tokens, tokens/s and the stage's eta."""
        if self.heartbeat is None:
            return None
        heartbeat, started = self.heartbeat, time.perf_counter()

        def report(trained: int, total: int) -> None:
            elapsed = time.perf_counter() - started
            heartbeat({"pattern": pattern, "lr": lr, "seed": seed, "budget": self.budget, "run": run,
                       "runs": len(self.spec.lrs), "tokens": trained, "total_tokens": total,
                       "tokens_per_s": trained / elapsed if elapsed > 0 else None})

        return report

    def _on_mixture(self, pattern: str, seed: int, report: Report) -> Evaluation:
        """Zoology's protocol at each of the budget's rates; the candidate keeps the rate it trains best at."""
        from search.mad.evaluate import CandidateFailed
        from search.recall_mixture import train_on_mixture

        results, failures = {}, {}
        for run, lr in enumerate(self.spec.lrs, start=1):
            try:
                results[lr] = train_on_mixture(pattern, self.spec, lr=lr, widths=self.widths, seed=seed,
                                               precision=self.precision, compile=self.compile,
                                               on_progress=self._reporter(pattern, lr, seed, run))
            except CandidateFailed as err:
                failures[lr] = err
        if not results:  # every rate diverged: the first failure says where, the rest are named
            first, *others = failures.values()
            also = f" (lr {', '.join(map(_rate, list(failures)[1:]))} failed too)" if others else ""
            raise CandidateFailed(first.reason + also, task=first.task, step=first.step)
        sweep = {_rate(rate): {"score": sum(r.accuracy_by_length.values()) / len(r.accuracy_by_length),
                               "train_loss": r.train_loss} for rate, r in results.items()}
        lr = lowest_final_loss({rate: result.train_loss for rate, result in results.items()})
        chosen, score = results[lr], sweep[_rate(lr)]["score"]
        if report is not None:
            report(0, score)
        sweep.update({_rate(rate): {"failed": err.reason} for rate, err in failures.items()})
        details = {"accuracy_by_length": chosen.accuracy_by_length, "protocol": "mixture",
                   "train_loss": chosen.train_loss, "lr": lr,
                   "kv_pairs": {str(n): self.spec.kv_pairs(n) for n in self.spec.lengths},
                   # the accuracies' denominators: a threshold read from one of them weighs its test-sample noise
                   "test_queries": {str(n): self.spec.test_examples * self.spec.kv_pairs(n)
                                    for n in self.spec.lengths},
                   # the sequences those queries come in and the spread of their accuracies: the queries of one
                   # sequence are not independent, so the interval is over sequences (search.tradeoffs)
                   "test_sequences": chosen.test_sequences,
                   "sequence_accuracy_sd": chosen.sequence_accuracy_sd}
        if len(self.spec.lrs) > 1:
            details["lr_sweep"] = sweep
        return Evaluation(score=score, seconds=sum(r.seconds for r in results.values()), details=details)


def mixer_stack(pattern: str, widths: str = "search-1m") -> str:
    """``pattern``'s sequence mixers in order, its feed-forward layers dropped: ``SDMMSD`` -> ``SDSD``.

    A layer mixes the sequence when it keeps something of earlier tokens at inference: a KV cache, a window or a
    fixed state (its primitive's own cache accounting, so a new primitive needs no entry here)."""
    from composer.accounting import analyze
    from composer.pattern import layers
    from composer.presets import get_preset

    tokens = layers(pattern)
    per = analyze(get_preset(widths).arch.with_pattern(pattern)).per_primitive
    mixes = {token for token, p in per.items() if p["kv_bytes_per_token"] or p["window"] or p["state_bytes"]}
    return "".join(token for token in tokens if token in mixes)


def lowest_final_loss(final_losses: dict[float, float]) -> float:
    """The learning rate whose run ends with the lowest training loss; a non-finite loss never wins.

    Why training loss and not test accuracy: the rate is then chosen without looking at the queries the
    candidate is scored on, so a sweep cannot pick a lucky test sample. With every loss non-finite the first
    rate is returned (its accuracy, near chance, says the rest).
    """
    chosen = best_rate(final_losses)
    return next(iter(final_losses)) if chosen is None else chosen


def _rate(lr: float) -> str:
    return f"{lr:g}"


__all__ = ["DEFAULT_KV_RATIO", "RECALL_BUDGETS", "RecallBudget", "RecallEvaluator", "get_recall_budget",
           "lowest_final_loss", "mixer_stack", "parse_lengths"]
