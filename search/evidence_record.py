"""The evidence for a pattern at a budget, typed: per-seed scores with the setting and rates they came from.

Why: the search's answer (``new`` / ``known`` / ``tie``, ``search.verdict``), the finalists' front and each known
layout's relation to the answer (``search.tradeoffs``) all take differences of scores. When those scores travel
as a leaderboard row's ``score`` plus an optional ``details["losses"]``, a row's ``score`` means one seed, a mean of
seeds or another rung's number depending on the budget, and nothing stops a difference between unlike numbers:
a confirmed answer's 3 seeds sized an interval centred on its one seed, a last rung that scored nothing had rung
0's 6-layer losses paired with the target model's, and a seed spread measured at ``demo-4m`` on the default corpus
stood in at ``llama-350m`` (issue 47). So every score the verdict weighs is an :class:`Evidence`:

* ``setting`` (:class:`Setting`): the budget, the preset it trained at, the corpus and the tokenizer. Two records
  are compared only when their settings are equal (:class:`IncomparableEvidence` otherwise), and a measured seed
  spread (:class:`SeedNoise`) stands in only for records of the setting it was measured at;
* ``scores`` and ``rates``: the score and the learning rate of every training seed. A confirmation's seeds join a
  rung's record only at the same setting and rate, on seeds the record does not have (:meth:`Evidence.with_seeds`);
* ``selected_on``: the seeds a choice was made on (the candidate's rate, and its place in the ranking the answer
  picks it from). The best of several finalists reads low on those seeds by chance (the winner's curse), so the
  verdict is also reported over the seeds that chose nothing (:func:`held_out_seeds`).

:func:`difference` is the one place a difference of two records is taken, with its interval from
``composer.statistics``: paired over 2 or more common seeds, else the two records' means with a measured seed
spread of their setting standing in for the seeds not trained, else no interval.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_CORPUS = "the offline default corpus"
DEFAULT_TOKENIZER = "the offline byte tokenizer"


class IncomparableEvidence(ValueError):
    """Two records of unlike settings (budget, preset, corpus, tokenizer), or of unlike rates, were to be combined."""


@dataclass(frozen=True)
class Setting:
    """What a score was measured under: two scores differ only by their patterns when their settings are equal.

    ``budget`` is the evaluator's budget without the confirmation prefix or the ``@preset`` suffix (a confirmation
    of ``rung-cpu-2@demo-4m`` and the rung itself share ``rung-cpu-2``), ``preset`` the widths the model trained at,
    ``data`` and ``tokenizer`` the corpus and tokenizer (None: the offline defaults), ``precision`` (``fp32``,
    ``bf16``) and ``device`` (``cpu``, ``cuda``) what it computed in and on: a seed spread measured in bf16 on a CPU
    says nothing of fp32 runs, nor of a GPU's, at the same rung (None: not recorded, as before issue 60)."""

    evaluator: str
    budget: str
    preset: str
    data: str | None = None
    tokenizer: str | None = None
    precision: str | None = None
    device: str | None = None

    def describe(self) -> str:
        """``rung-cpu-2 at demo-4m on the offline default corpus, bf16 on cpu``: for the lines that say what was
        compared."""
        corpus = DEFAULT_CORPUS if self.data is None else self.data
        tokenizer = "" if self.tokenizer is None else f", tokenizer {self.tokenizer}"
        computed = ", ".join(part for part in (self.precision, self.device and f"on {self.device}") if part)
        return f"{self.budget} at {self.preset} on {corpus}{tokenizer}" + (f", {computed}" if computed else "")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, said: Mapping[str, Any]) -> Setting:
        return cls(**{field.name: said.get(field.name) for field in dataclasses.fields(cls)})


@dataclass(frozen=True)
class SeedNoise:
    """A seed standard deviation of one run's score, measured at ``setting``, standing in for seeds not trained
    there (and only there: a spread measured at ``demo-4m`` on the default corpus says nothing of ``llama-350m`` or
    of another corpus)."""

    sd: float  # standard deviation of one run's score across training seeds
    dof: int  # degrees of freedom of that estimate (runs - patterns, pooled)
    source: str  # where it was measured (a doc section or results file)
    setting: Setting | None = None  # None: measured nowhere in particular, applies to nothing

    def applies_to(self, setting: Setting) -> bool:
        return self.setting == setting and self.sd > 0 and self.dof >= 1

    def as_dict(self) -> dict[str, Any]:
        return {"sd": self.sd, "dof": self.dof, "source": self.source,
                "setting": None if self.setting is None else self.setting.as_dict()}


@dataclass(frozen=True)
class Evidence:
    """One pattern's scores at one setting: seed -> score, seed -> learning rate, and the seeds a choice was made on."""

    pattern: str
    setting: Setting
    scores: Mapping[int, float]
    rates: Mapping[int, float | None] = field(default_factory=dict)
    selected_on: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        # a seed without a finite score (None, or NaN from a diverged or custom evaluator) is no seed: counting it
        # would name 3 seeds in a record whose difference pairs 2, and NaN would poison every mean it joins
        object.__setattr__(self, "scores", {int(s): float(v) for s, v in self.scores.items() if is_finite_score(v)})
        object.__setattr__(self, "rates", {int(s): (None if v is None else float(v)) for s, v in self.rates.items()})
        object.__setattr__(self, "selected_on", frozenset(int(s) for s in self.selected_on))

    @property
    def seeds(self) -> list[int]:
        return sorted(self.scores)

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores)

    def only(self, seeds: Iterable[int]) -> Evidence:
        """The record restricted to ``seeds``."""
        keep = set(seeds)
        return dataclasses.replace(self, scores={s: v for s, v in self.scores.items() if s in keep},
                                   rates={s: v for s, v in self.rates.items() if s in keep},
                                   selected_on=self.selected_on & keep)

    def with_seeds(self, other: Evidence) -> Evidence:
        """This record and ``other``'s further seeds: refused unless the pattern, setting and rate are the same and
        the seeds are new (a confirmation that trained a seed the rung had, or at another rate, is not more seeds
        of the same run)."""
        if other.pattern != self.pattern or other.setting != self.setting:
            raise IncomparableEvidence(f"{other.pattern} at {other.setting.describe()} is not more seeds of "
                                       f"{self.pattern} at {self.setting.describe()}")
        again = sorted(set(other.scores) & set(self.scores))
        if again:
            raise IncomparableEvidence(f"{self.pattern}: seed(s) {', '.join(map(str, again))} already counted")
        ours, theirs = set(self.rates.values()) - {None}, set(other.rates.values()) - {None}
        if ours and theirs and ours != theirs:
            raise IncomparableEvidence(f"{self.pattern}: further seeds at lr {', '.join(f'{r:g}' for r in theirs)} "
                                       f"are not the rung's lr {', '.join(f'{r:g}' for r in ours)}")
        return dataclasses.replace(self, scores={**self.scores, **other.scores}, rates={**self.rates, **other.rates},
                                   selected_on=self.selected_on | other.selected_on)

    def as_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "setting": self.setting.as_dict(),
                "scores": {str(s): self.scores[s] for s in self.seeds},
                "rates": {str(s): self.rates.get(s) for s in self.seeds},
                "selected_on": sorted(self.selected_on)}

    @classmethod
    def from_dict(cls, said: Mapping[str, Any]) -> Evidence:
        return cls(said["pattern"], Setting.from_dict(said["setting"]), said["scores"], said.get("rates") or {},
                   frozenset(said.get("selected_on") or ()))

    @classmethod
    def of_row(cls, row: Mapping[str, Any], setting: Setting, seed: int,
               selected_on: Iterable[int] | None = None) -> Evidence:
        """A leaderboard row's record: its per-seed scores (``details["losses"]``; else its one score, at ``seed``,
        the seed its stage trained), each at the row's rate. ``selected_on`` None: the row was ranked among others
        on all of its seeds (a rung's, whose best is the answer); a confirmation's rows chose nothing (``()``)."""
        details = row.get("details") or {}
        scores = details.get("losses") or {seed: row["score"]}
        rate = details.get("lr")
        rate = float(rate) if isinstance(rate, (int, float)) else None
        scores = {int(s): v for s, v in scores.items() if is_finite_score(v)}
        return cls(row["pattern"], setting, scores, {s: rate for s in scores},
                   frozenset(scores if selected_on is None else selected_on))


def is_finite_score(value: Any) -> bool:
    """A score that counts: a finite number (not None, NaN or infinite)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def attach(rows: Iterable[dict[str, Any]], setting: Setting, seed: int) -> None:
    """Give each row without one its record (``row["evidence"]``, JSON), from the stage whose ranking it is in."""
    for row in rows:
        if "evidence" not in row:
            row["evidence"] = Evidence.of_row(row, setting, seed).as_dict()


def of(row: Mapping[str, Any]) -> Evidence:
    """A row's record. A row without one is refused: a difference is taken only between records that say what
    they were measured under."""
    said = row.get("evidence")
    if said is None:
        raise IncomparableEvidence(f"{row['pattern']}: no evidence record (its stage's setting is unknown)")
    return said if isinstance(said, Evidence) else Evidence.from_dict(said)


def held_out_seeds(new: Evidence, known: Evidence) -> list[int]:
    """The seeds both records have that chose nothing for either: not the seed a finalist's rate was chosen on, nor
    one the ranking that picked the best new finalist was made on."""
    return sorted((set(new.scores) & set(known.scores)) - new.selected_on - known.selected_on)


def difference(new: Evidence, known: Evidence, noise: SeedNoise | None = None, confidence: float = 0.95,
               seeds: Iterable[int] | None = None) -> dict[str, Any]:
    """The interval of ``new - known`` (see the module docstring), over ``seeds`` when given (both records are cut
    to them first). Returns ``{"difference", "ci", "method", "seeds", "new_seeds", "known_seeds", "setting",
    "noise"}``: ``seeds`` the common seeds paired over (empty when the interval is not paired), ``noise`` the
    stand-in's source when one was used, ``ci`` None when there is no interval and ``difference`` None when a
    side has no seed."""
    from composer.statistics import difference_of_means, paired_difference

    if new.setting != known.setting:
        raise IncomparableEvidence(f"{new.pattern} at {new.setting.describe()} and {known.pattern} at "
                                   f"{known.setting.describe()} were not measured alike")
    if seeds is not None:
        seeds = list(seeds)
        new, known = new.only(seeds), known.only(seeds)
    said = {"new_seeds": new.seeds, "known_seeds": known.seeds, "setting": new.setting.as_dict(), "noise": None,
            "seeds": []}
    if not new.scores or not known.scores:
        return {**said, "difference": None, "ci": None, "method": "no seed on one side"}
    common = sorted(set(new.scores) & set(known.scores))
    if len(common) >= 2:
        paired = paired_difference({s: new.scores[s] for s in common}, {s: known.scores[s] for s in common},
                                   confidence)
        unpaired = sorted(set(new.scores) ^ set(known.scores))
        return {**said, "difference": paired["mean"], "ci": paired["ci"], "seeds": common,
                "method": f"paired over seeds {', '.join(map(str, common))} (t interval of the per-seed differences)"
                          + (f"; seed(s) {', '.join(map(str, unpaired))} of one side only left out" if unpaired
                             else "") + wider_than_stand_in(paired["ci"], common, new, known, noise, confidence)}
    sides = f"{len(new.scores)} seed(s) against {len(known.scores)}, each side's mean"
    if noise is not None and noise.applies_to(new.setting):
        means = difference_of_means(list(new.scores.values()), list(known.scores.values()), noise.sd, noise.dof,
                                    confidence)
        return {**said, "difference": means["mean"], "ci": means["ci"], "noise": noise.source,
                "method": f"{sides}: the seed sd measured at {new.setting.describe()} ({noise.sd:.4f}, {noise.dof} "
                          f"dof; {noise.source}) stands in for seeds not trained"}
    elsewhere = ("" if noise is None or noise.setting is None
                 else f" (the spread measured at {noise.setting.describe()} does not apply here)")
    draw = ("the difference is a single draw" if len(new.scores) == len(known.scores) == 1
            else "the seeds' noise is not estimated")
    return {**said, "difference": new.mean - known.mean, "ci": None,
            "method": f"{sides}, and no seed spread measured at {new.setting.describe()}{elsewhere}: no interval, "
                      f"{draw}"}


def wider_than_stand_in(ci: list[float] | None, common: list[int], new: Evidence, known: Evidence,
                        noise: SeedNoise | None, confidence: float) -> str:
    """Why a paired interval is wider than the measured spread's over the same seeds would be, or "": pairing over
    few seeds has few degrees of freedom (2 seeds: 1, t = 12.7 at 95%), so a confirmation of one seed more can
    leave the answer less certain than the stand-in it replaces (issue 60). The pairing is kept (it is the design:
    a spread measured elsewhere only stands in for seeds not trained), and the reader is told."""
    from composer.statistics import difference_of_means

    if ci is None or noise is None or not noise.applies_to(new.setting) or len(common) - 1 >= noise.dof:
        return ""
    stand_in = difference_of_means([new.scores[s] for s in common], [known.scores[s] for s in common], noise.sd,
                                   noise.dof, confidence)["ci"]
    if stand_in is None or ci[1] - ci[0] <= stand_in[1] - stand_in[0]:
        return ""
    return (f"; wider than the measured seed spread's interval over the same seeds [{stand_in[0]:+.4f}, "
            f"{stand_in[1]:+.4f}] ({noise.dof} dof): {len(common)} paired seeds leave {len(common) - 1} degree(s) "
            f"of freedom; confirm with more seeds to narrow it")


__all__ = ["DEFAULT_CORPUS", "Evidence", "IncomparableEvidence", "SeedNoise", "Setting", "attach", "difference",
           "held_out_seeds", "of"]
