"""What a search strategy is: a rule for which study to run next over which layers, and what the answer is.

``composer search`` (``search.run``) drives every strategy the same way: it asks :meth:`Strategy.next_stage` for
the next stage, runs its Optuna study to its budget (``search.engine``), and when the strategy has no next stage,
or the deadline has passed, it asks :meth:`Strategy.answer` for the ranking to report. How a stage ends is the
stage's own rule (``Stage.only_first``: exactly its enqueued patterns; otherwise ``trials`` evaluations).
A new strategy (Hyperband's brackets, another promotion rule) is one new module with one subclass, registered
in ``search.strategies``; nothing else changes (``docs/search.md``, "Adding a strategy").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from composer.errors import ConfigError
from search.config import SearchConfig
from search.engine import Stage
from search.known import known_layouts
from search.leaderboard import failures
from search.progress import stage_label
from search.spaces import Space, build_space

MAX_BRUTE_FORCE = 4096


@dataclass(frozen=True)
class StagePlan:
    """The next stage to run: the settings its study runs with (a rung's own budget, say), the stage, and a line
    to print when it starts (or None)."""

    config: SearchConfig
    stage: Stage
    announce: str | None = None


@dataclass
class StageRun:
    """A stage that ran: its plan, its study and leaderboard (best first), and when it started and ended."""

    config: SearchConfig
    stage: Stage
    study: Any  # optuna.Study
    rows: list[dict[str, Any]]
    started: float
    finished: float


@dataclass
class Answer:
    """What a strategy reports: the ranking the answer comes from (``study``, ``rows``), where it stopped early
    (None when it finished), and files of its own for the search's ``--out`` (name -> JSON-able content)."""

    study: Any
    rows: list[dict[str, Any]]
    stopped_early: dict[str, Any] | None = None
    files: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)  # extra keys for best.json
    # the rows an answer may come from, best first, where a constraint left some out (--min-recall); None: all
    eligible: list[dict[str, Any]] | None = None


class Strategy(ABC):
    """One search strategy. Subclasses set ``name`` and say what to train next and what the answer is."""

    name: ClassVar[str]
    stage_kind: ClassVar[str] = "stage"  # what progress lines call a stage ("rung" for successive halving)

    def first_config(self, config: SearchConfig) -> SearchConfig:
        """The settings the first stage's study runs with (its evaluator is built, and checked, first)."""
        return config

    def stage_count(self, config: SearchConfig) -> int:
        """How many stages the strategy runs at most (for the progress lines' labels)."""
        return 1

    def label(self, config: SearchConfig, index: int) -> str:
        """The prefix of stage ``index``'s progress lines: none for a single stage."""
        count = self.stage_count(config)
        return f"{stage_label(self.stage_kind, index, count)} " if count > 1 else ""

    @abstractmethod
    def next_stage(self, config: SearchConfig, done: list[StageRun], echo) -> StagePlan | None:
        """What to train next, given the stages that ran (in order); None when the search is done."""

    def answer(self, config: SearchConfig, done: list[StageRun], stopped: str | None,
               out_of_time: bool) -> Answer:
        """The ranking of the last stage that scored anything. ``stopped``: why the driver started no further
        stage (the deadline), or None; ``out_of_time``: whether the deadline had passed when the search ended."""
        last = next(run for run in reversed(done) if run.rows)
        early = None if stopped is None else {"stage": last.stage.index, "why": stopped, "missing": []}
        return Answer(last.study, last.rows, stopped_early=early)


def missing_first(run: StageRun) -> list[dict[str, Any]]:
    """The enqueued patterns of a stage that trains only those (a rung's promotions) that it did not score,
    each with why: its failure, or the deadline. Empty for other stages."""
    if not run.stage.only_first:
        return []
    scored = {row["pattern"] for row in run.rows}
    reasons = {f["pattern"]: f["reason"] for f in failures(run.study) if f["state"] == "failed"}
    return [{"pattern": pattern, **({"known": attrs["known"]} if "known" in attrs else {}),
             "reason": reasons.get(pattern, "not trained: the search's --timeout passed first")}
            for pattern, attrs in run.stage.first if pattern not in scored]


def make_space(config: SearchConfig, n_layers: int, head: str = "", tail: str = "") -> Space:
    """The searched layers of a stage (its ``--space``) under the search's constraints; brute force over too many is
    refused, and walks the mixers space's active slots only (``search.mixer_space``: why)."""
    space = build_space(config.space, n_layers, config.primitives, config.min_share, config.max_share,
                        config.max_params, head, tail, conditional=config.sampler_name == "brute")
    if config.sampler_name == "brute" and space.size > MAX_BRUTE_FORCE:
        raise ConfigError(f"brute force over {space.size:,} patterns is too many (max {MAX_BRUTE_FORCE:,}); "
                          "use --sampler gp or fewer --layers")
    return space


def known_first(config: SearchConfig, space: Space, echo) -> tuple[tuple[str, dict], ...]:
    """The known layouts the first stage enqueues (none with ``known: false``), fitted to the space's depth; says
    which were left out and why: a layout the space cannot express (the mixers space: an FFN first, or 3 after a
    mixer) or one outside the constraints."""
    if not config.known:
        return ()
    layouts, left_out = known_layouts(space.known_depth, space.choices, config.equal_cost is not None)
    allowed = []
    for layout in layouts:
        inexpressible = space.inexpressible(layout.pattern)
        violation = None if inexpressible else space.violation(layout.pattern)
        if inexpressible:
            left_out[layout.name] = f"{layout.pattern} is not in the space: {inexpressible}"
        elif violation:
            left_out[layout.name] = f"outside the constraints: {violation}"
        else:
            allowed.append(layout)
    if left_out:
        echo("   known layouts left out: " + "; ".join(f"{name} ({why})" for name, why in left_out.items()))
    return tuple((layout.pattern, {"known": layout.name, "known_fit": layout.fit}) for layout in allowed)
