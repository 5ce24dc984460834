"""The search's answer against its best known layout, typed: best.json's ``vs_known`` as one record.

Why: the answer travelled from ``search.verdict`` through ``search.run`` (which adds the early stop, the missing
floor and the standing at equal cost), into ``best.json`` and back into ``search.summary`` as a loosely keyed
dict, each reader guessing which keys a writer set (issue 60). :class:`Comparison` names every field once, with
its meaning; :class:`Side` is one side of it. ``as_dict`` writes the JSON best.json has always held (the same
keys, present under the same conditions), ``from_dict`` reads it back, and a record reads like that JSON
(``said["answer"]``), so readers of either kind see one shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class ReadsLikeItsJson(Mapping):
    """A record read like the JSON it writes (``as_dict``), so a reader of best.json and a reader of the record
    see one shape."""

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


@dataclass(eq=False)
class Side(ReadsLikeItsJson):
    """One side of the comparison: the best new pattern, or the best known layout (``name``: its family)."""

    pattern: str
    score: float  # its row's score (the rung's, on the seed it was ranked on)
    name: str | None = None  # the known layout's name; None for the new side
    mean: float | None = None  # over the seeds the difference used (the paired ones where it pairs)
    seeds: list[int] | None = None
    mean_all: float | None = None  # over all of its seeds, where some were left out of the pairing
    all_seeds: list[int] | None = None

    def as_dict(self) -> dict[str, Any]:
        said = {"pattern": self.pattern}
        if self.name is not None:
            said["name"] = self.name
        said["score"] = self.score
        said.update({key: getattr(self, key) for key in ("mean", "seeds", "mean_all", "all_seeds")
                     if getattr(self, key) is not None})
        return said

    @classmethod
    def from_dict(cls, said: Mapping[str, Any] | None) -> Side | None:
        if said is None:
            return None
        return cls(**{f.name: said.get(f.name) for f in dataclasses.fields(cls)})


# present only once both sides were compared (with None where the comparison has no such figure)
COMPARED = ("difference", "ci", "interval", "new_is_better", "verdict", "setting", "seeds", "new_seeds",
            "known_seeds", "noise_source")
# present only where set
OPTIONAL = ("note", "selected_on", "held_out", "seed_noise", "stopped_early", "floor_missing", "at_equal_cost")


@dataclass(eq=False)
class Comparison(ReadsLikeItsJson):
    """best.json's ``vs_known``: the answer (``new``, ``known``, ``tie``; None when nothing may be the answer), the
    pattern it recommends, both sides, and how their difference was measured."""

    answer: str | None
    recommended: str | None
    best_new: Side | None = None
    best_known: Side | None = None
    compared: bool = False  # both sides existed and their difference was taken
    difference: float | None = None  # new - known, in the score's units
    ci: list[float] | None = None  # its interval; None: no interval (a tie)
    interval: str | None = None  # how the interval was obtained, in words
    new_is_better: bool | None = None
    verdict: str | None = None  # the answer in one sentence
    setting: dict[str, Any] | None = None  # what both sides were measured under (search.evidence_record.Setting)
    seeds: list[int] = field(default_factory=list)  # the seeds paired over (empty: not paired)
    new_seeds: list[int] | None = None
    known_seeds: list[int] | None = None
    noise_source: str | None = None  # the measured seed spread that stood in, if one did
    note: str | None = None  # why there is no comparison or no answer
    selected_on: list[int] | None = None  # the seeds a finalist or its rate was chosen on
    held_out: dict[str, Any] | None = None  # the verdict over the seeds that chose nothing
    seed_noise: dict[str, Any] | None = None  # the stand-in spread the search had, and whether it was used
    stopped_early: dict[str, Any] | None = None  # where a search cut short stopped (search.run)
    floor_missing: str | None = None  # known layouts entered, none in the final ranking (search.run)
    at_equal_cost: dict[str, Any] | None = None  # dominates the best known layout, or wins on loss only

    def as_dict(self) -> dict[str, Any]:
        said = {"answer": self.answer,
                "best_known": None if self.best_known is None else self.best_known.as_dict(),
                "best_new": None if self.best_new is None else self.best_new.as_dict(),
                "recommended": self.recommended}
        if self.compared:
            said.update({key: getattr(self, key) for key in COMPARED})
        said.update({key: getattr(self, key) for key in OPTIONAL if getattr(self, key) is not None})
        return said

    @classmethod
    def from_dict(cls, said: Mapping[str, Any]) -> Comparison:
        values = {f.name: said.get(f.name) for f in dataclasses.fields(cls) if f.name in said}
        values.update(best_new=Side.from_dict(said.get("best_new")), best_known=Side.from_dict(said.get("best_known")),
                      compared="difference" in said, seeds=said.get("seeds") or [])
        values.setdefault("answer", None)
        values.setdefault("recommended", None)
        return cls(**values)


__all__ = ["Comparison", "ReadsLikeItsJson", "Side"]
