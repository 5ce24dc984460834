"""``composer search --plan``: what a search will train, where, and about how long it takes, before anything trains.

Why: a successive-halving search on the ``gpu`` ladder trains finalists for 200M tokens at ``llama-350m`` widths;
a researcher books GPUs for it and needs its GPU-hours, the runs of every rung and how ``--workers`` maps to the
GPUs before the first one starts (issue 49). The plan opens no storage and writes nothing: it reads the ladder's
definitions (``search.fidelity``, ``search.lm``) and the strategy's own rules, so it says what the search would do.

**What it counts** (per stage, in the order the search runs them):

* rung 0: ``--trials`` candidates (at most the space's size), each trained once per rate of its budget;
* rung k > 0: the best ``keep`` of the rung below, plus the known layouts that go on beside them (the floor),
  plus under a forecast promotion up to ``keep`` more that could still be best, plus under ``--min-recall`` up to
  ``keep`` more that can recall (``search.fidelity.promote``); hence a least and a most. A rung that continues
  the trunks of the rung below trains one run per seed from the trunk (only the tokens past it); a budget with
  ``extend_edge`` may train one more rate;
* ``--confirm-seeds N``: the best new and the best known finalist, ``N`` less the last rung's seeds more runs each;
* the recall probe (``--min-recall`` where the finalists' trained models are not read): every finalist.

**How long** (``SecondsModel``): the work of a run is ``search.progress.stage_work``'s, the same FLOPs count the
search's own ``search eta`` line uses (forward and backward per trained token, a third of it per held-out token,
the mean over the known layouts the rung trains, each as the model the rung builds for it). Its speed:

* on CUDA, a step takes the longer of its kernel launches (aten ops per step x 13.8 us, measured on an H200:
  rung-gpu-0's ``AMAMAM`` trained 32 x 1,024-token steps at 3.33M tok/s, 9.83 ms for ~711 ops; docs/gpu.md) and
  its FLOPs at a share of the GPU's dense bf16 peak (40% at ``llama-350m`` widths and up, from the compiled 1B
  runs' 47-48% MFU; 10% below, assumed), plus ~1 s per run (model build, the first step; the same measurement).
  The longer, not the sum as ``benchmarks/recall_scale.py`` adds them: CUDA launches overlap the GPU's work, and
  at the measured point the sum would overshoot the measured step by a third. Ops per layer are
  ``recall_scale``'s CPU counts. Only rung 0 of the gpu ladder has been timed on a GPU; the rungs at
  ``llama-350m`` widths are derived (x0.5-x2);
* on the CPU, FLOPs per second per core as measured for the default search (the cpu ladder on 2 idle cores,
  ``benchmarks/results/default_search_timed-2026-11-28.json``: 85 GFLOP/s at the search widths, 131 at
  ``demo-4m``), taken to scale with the threads a worker gets (x0.7-x1.5). At tiny budgets (the smoke ladder) a
  run's fixed costs dominate, which the figure does not hold: such a plan says so. The rate was measured on A/M
  patterns; S and D run many small ops on the CPU (a scan, a chunk loop) and train about a third as fast per FLOP
  (SMSAMS at rung-cpu-0), so a plan that searches them says its figure is low (``SLOW_ON_CPU``).

A rung's wall time is its candidates in rounds of one per worker (``ceil(candidates / parallel)`` x a candidate's
runs), where ``parallel`` is the workers (on CUDA at most the GPUs: more workers than GPUs share them). Its
device-hours are that wall time x the GPUs its workers hold. Stages run one after another (a rung starts when the
rung below has finished), so later rungs with few candidates leave most of a large node idle; the plan says so.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from search.config import SearchConfig

# -- the speed figures (the module docstring says where each comes from) ------------------------------------------
SECONDS_PER_OP = 9.83e-3 / 711  # rung-gpu-0's AMAMAM on an H200, eager bf16 (docs/gpu.md, fourth run)
OPS_PER_LAYER = {"A": 141, "W": 141, "M": 90, "S": 380, "E": 200}  # counted on the CPU (one layer, a dispatch mode)
# D runs a loop over 64-token chunks on Hopper (fla's backward refuses there): counted 855 ops at 512 tokens and
# 2,103 at 2,048, so its count is taken as linear in the chunks
D_OPS = ((512, 855), (2048, 2103))
BASE_OPS = 18  # embedding, head and loss
COMPUTE_SHARE = {"large": 0.40, "small": 0.10}  # of the dense bf16 peak; "large": d_model >= LARGE_WIDTH
LARGE_WIDTH = 1024  # llama-350m's d_model
GPU_RUN_FIXED_S = 1.0  # a rung-gpu-0 run of 491,520 tokens took 1.12 s, ~0.15 s of it training
# the cpu ladder on 2 idle cores (default_search_timed-2026-11-28.json): stage_work's FLOPs / the rung's wall time
CPU_FLOPS_PER_CORE = {"search": 85.0e9 / 2, "target": 131.0e9 / 2}
# primitives whose CPU paths (a scan, a chunk loop) run far below the A/M FLOP rate the CPU figure was measured on
SLOW_ON_CPU = "SD"
UNCERTAINTY = {"measured": (0.7, 1.5), "derived": (0.5, 2.0)}
TINY_RUN_S = 5.0  # below this a run's estimate is its fixed costs more than its FLOPs


@dataclass(frozen=True)
class Device:
    """What the search's workers train on: ``count`` GPUs named ``name`` (0: the CPU) and the host's cores."""

    kind: str  # "cuda" or "cpu"
    count: int
    name: str
    cpus: int
    peak: float | None = None  # dense bf16 FLOP/s of one GPU

    @classmethod
    def here(cls) -> Device:
        import torch

        cpus = os.cpu_count() or 1
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            from composer.training.throughput import peak_flops

            name = torch.cuda.get_device_name(0)
            return cls("cuda", torch.cuda.device_count(), name, cpus,
                       peak_flops(torch.device("cuda", 0), torch.bfloat16) or peak_of(name))
        return cls("cpu", 0, "CPU", cpus)

    @classmethod
    def gpus(cls, count: int, name: str = "NVIDIA H200", cpus: int = 64) -> Device:
        """A node of ``count`` GPUs (what a plan is for when it is made on another machine, as in the recipes)."""
        return cls("cuda", count, name, cpus, peak_of(name))

    def describe(self) -> str:
        if self.kind == "cpu":
            return f"CPU, {self.cpus} cores (no CUDA device)"
        peak = f", {self.peak / 1e12:,.0f} TFLOP/s bf16 each" if self.peak else ", peak unknown"
        return f"{self.count} x {self.name}{peak}"


def peak_of(name: str) -> float | None:
    """The dense bf16 peak of a GPU by its name: Lightning's table (the chip names it keys), else the project's
    fallback (``composer.training.throughput``)."""
    import torch
    from composer.training.throughput import fallback_peak

    lowered = name.lower()
    try:
        from lightning.fabric.utilities.throughput import _CUDA_FLOPS

        for chip in sorted(_CUDA_FLOPS, key=len, reverse=True):
            if chip in lowered and torch.bfloat16 in _CUDA_FLOPS[chip]:
                return float(_CUDA_FLOPS[chip][torch.bfloat16])
    except ImportError:  # an older or newer Lightning: the fallback table still knows the H200
        pass
    return fallback_peak(name)


@dataclass
class StagePlan:
    """One stage of the plan: a rung, the confirmation or the recall probe."""

    name: str
    budget: str
    study: str
    preset: str | None = None  # widths the candidates train at
    tokens: int | None = None  # tokens trained per run (from scratch)
    start_tokens: int = 0  # a continued run's trunk: it trains only the tokens past it
    seq_len: int | None = None
    batch_size: int | None = None
    rates: int | None = None
    seeds: int | None = None
    runs: tuple[int, int] = (1, 1)  # runs per candidate, least and most
    candidates: tuple[int, int] = (0, 0)  # entering, least and most
    expected: int = 0  # the candidates the estimate counts (the search eta's count: no forecast extras)
    run_seconds: float | None = None  # one run's estimate on one worker
    wall_seconds: float | None = None  # the stage's, at the expected candidates and the least runs
    wall_seconds_most: float | None = None  # at the most candidates and runs
    device_hours: float | None = None
    basis: str = "derived"
    notes: list[str] = field(default_factory=list)

    @property
    def total_runs(self) -> tuple[int, int]:
        return self.candidates[0] * self.runs[0], self.candidates[1] * self.runs[1]

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_runs": list(self.total_runs)}


def _d_ops(seq_len: int) -> float:
    (l0, o0), (l1, o1) = D_OPS
    return o0 + (o1 - o0) * (seq_len - l0) / (l1 - l0)


def ops_per_step(pattern: str, seq_len: int) -> float:
    """aten ops of one eager forward and backward of ``pattern`` (``recall_scale``'s counts per layer)."""
    from composer.pattern import layers

    counts = {**OPS_PER_LAYER, "D": _d_ops(seq_len)}
    return BASE_OPS + sum(counts.get(symbol, max(counts.values())) for symbol in layers(pattern))


class SecondsModel:
    """Seconds of one run on one worker of ``device`` (the module docstring says how and from what)."""

    def __init__(self, device: Device, workers: int) -> None:
        self.device = device
        self.workers = workers
        self.threads = max(1, device.cpus // workers)

    def run_seconds(self, work, patterns: list[str], seq_len: int, batch_size: int,
                    grown: bool) -> tuple[float, str]:
        """Seconds of one run and the estimate's basis (``measured`` or ``derived``). ``work``: a
        ``search.progress.StageWork``; ``patterns``: the models it trains, as built; ``grown``: whether they are
        grown to a preset (the CPU's figure for the target's widths) rather than trained at the search widths."""
        from composer.presets import get_preset

        from search.progress import FORWARD_SHARE

        if self.device.kind == "cpu":
            per_core = CPU_FLOPS_PER_CORE["target" if grown else "search"]
            return work.run_work / (per_core * self.threads), "measured"
        large = get_preset(work.widths).arch.d_model >= LARGE_WIDTH
        step_tokens = seq_len * batch_size
        trained = work.budget_tokens - work.start_tokens
        flops_s = COMPUTE_SHARE["large" if large else "small"] * (self.device.peak or 989.4e12)
        ops = sum(ops_per_step(p, seq_len) for p in patterns) / len(patterns)
        step_s = max(ops * SECONDS_PER_OP, work.flops_per_token * step_tokens / flops_s)
        scored = FORWARD_SHARE * work.eval_tokens * work.flops_per_token / flops_s
        basis = "measured" if not large and work.widths == "search-1m" else "derived"
        return trained / step_tokens * step_s + scored + GPU_RUN_FIXED_S, basis

    @property
    def parallel(self) -> int:
        return min(self.workers, self.device.count) if self.device.kind == "cuda" else self.workers

    def stage(self, plan: StagePlan, run_seconds: float) -> None:
        """Fill a stage's wall time and device-hours from one run's seconds: rounds of one candidate per worker,
        at its expected candidates and least runs, and at its most of both."""
        plan.run_seconds = run_seconds
        plan.wall_seconds = math.ceil(plan.expected / self.parallel) * plan.runs[0] * run_seconds
        plan.wall_seconds_most = math.ceil(plan.candidates[1] / self.parallel) * plan.runs[1] * run_seconds
        held = self.parallel if self.device.kind == "cuda" else 0
        plan.device_hours = plan.wall_seconds * held / 3600 if held else None
        if plan.expected and plan.expected < self.parallel:
            plan.notes.append(f"about {plan.expected} candidates on {self.parallel} workers: "
                              f"{self.parallel - plan.expected} idle while it runs")


def _representatives(config: SearchConfig, first) -> tuple[list[str], dict[str, str]]:
    """The patterns a rung's FLOPs are averaged over (its known layouts, as ``search eta`` does) and their names."""
    from search.progress import SearchEta

    patterns = [pattern for pattern, _ in first] or [SearchEta._representative(config)]
    return patterns, {pattern: attrs["known"] for pattern, attrs in first if "known" in attrs}


def _trained_patterns(patterns, known, spec, config) -> list[str]:
    if not spec.extrapolate_to:
        return list(patterns)
    from scaling.extrapolate import OffTarget

    trained = []
    for p in patterns:
        try:
            trained.append(config.growth.grow(p, spec.extrapolate_to, known.get(p)).layout)
        except OffTarget:  # not within the growth's tolerance (too deep for --equal-cost): skipped, trains nothing
            continue
    return trained or list(patterns)


def _lm_stage(name, budget, study, candidates, expected, config, patterns, known, below, model: SecondsModel,
              extra_run: bool = False) -> StagePlan:
    from search.lm import get_lm_budget
    from search.progress import stage_work

    spec = get_lm_budget(budget)
    work = stage_work(budget, max(candidates[1], 1), patterns, config.widths, below, config.growth, known)
    runs = work.runs + (1 if extra_run and spec.extend_edge and len(spec.lrs) > 1 and not work.start_tokens else 0)
    plan = StagePlan(name, budget, study, spec.extrapolate_to or config.widths, work.budget_tokens, work.start_tokens,
                     spec.seq_len, spec.batch_size, len(spec.lrs), spec.seeds, (work.fewest_runs, runs),
                     candidates, expected)
    if work.start_tokens and work.least_runs:
        plan.notes.append(f"continues rung below's trunks from {work.start_tokens:,} tokens: the rate chosen there "
                          "and each lower rate of its grid, a run each, the best chosen here")
    elif work.start_tokens:
        plan.notes.append(f"continues rung below's trunks from {work.start_tokens:,} tokens: one run per seed at "
                          "the rate chosen there")
    elif spec.confirms:
        plan.notes.append("from scratch at each finalist's chosen rate, one run per further seed")
    if work.start_tokens or spec.confirms:
        plan.rates = 1 + work.runs - work.fewest_runs  # the rate(s) continued from below
    if runs > work.runs:
        plan.notes.append("a rate at the grid's edge may add one run (extend_edge)")
    if spec.recall_sequences:
        plan.notes.append(f"measures each finalist's trained recall on {spec.recall_sequences} sequences")
    seconds, plan.basis = model.run_seconds(work, _trained_patterns(patterns, known, spec, config), spec.seq_len,
                                            spec.batch_size, grown=spec.extrapolate_to is not None)
    model.stage(plan, seconds)
    return plan


def _halving_stages(config: SearchConfig, model: SecondsModel) -> list[StagePlan]:
    from search.fidelity import get_ladder, rung_budget
    from search.lm import confirm_budget
    from search.strategies.base import known_first, make_space
    from search.config import budget_definition_digest
    from search.strategies.successive_halving import base_study, last_rung_seeds, rung_config

    ladder = get_ladder(config.budget)
    space = make_space(config, config.layers)
    first = known_first(config, space, echo=lambda _: None)
    patterns, known = _representatives(config, first)
    floor_all = len(known) if config.known else 0
    pool = config.recall_source is not None
    stages: list[StagePlan] = []
    least = expected = most = min(config.trials, space.size)
    for index, rung in enumerate(ladder.rungs):
        if index:
            floor = floor_all if rung.known == "all" else min(floor_all, 1)
            pooled = rung.keep * pool + rung.hedge
            least = min(least, rung.keep)
            expected = min(expected, rung.keep + pooled + floor)  # as SearchEta counts a rung
            most = min(most, rung.keep + pooled + floor + rung.keep * (rung.promote_by == "forecast"))
        below = rung_budget(ladder, index - 1, config.target) if index else None
        stages.append(_lm_stage(f"rung {index}", rung_budget(ladder, index, config.target),
                                rung_config(config, index).study_name, (least, most), expected, config, patterns,
                                known, below, model, extra_run=True))
    last = stages[-1]
    if config.probes_recall:  # the study name recall_plan gives it
        definition = budget_definition_digest("recall", config.recall_budget)
        probe = StagePlan("recall probe", config.recall_budget,
                          f"{base_study(config)}-recall-{config.recall_budget}-{definition}", candidates=(least, most),
                          expected=expected)
        from search.progress import PROBE_CORE_SECONDS

        model.stage(probe, PROBE_CORE_SECONDS / model.threads)
        probe.notes.append("each finalist's mixers on MQAR, about 10 min on 2 CPU cores (not timed on a GPU)")
        stages.append(probe)
    if config.confirm_seeds > 1:  # the budget and study name confirm_plan gives it
        budget = confirm_budget(last.budget, config.confirm_seeds - last_rung_seeds(config))
        stages.append(_lm_stage("confirmation", budget, f"{base_study(config)}-confirm{config.confirm_seeds}",
                                (2, 2), 2, config, patterns, known, None, model))
    return stages


def _single_stage(config: SearchConfig, model: SecondsModel) -> list[StagePlan]:
    from search.strategies import get_strategy
    from search.strategies.base import known_first, make_space

    count = get_strategy(config.strategy).stage_count(config)
    space = make_space(config, config.layers)
    candidates = (min(config.trials, space.size),) * 2
    if config.evaluator != "lm":
        plan = StagePlan("stage 0", config.budget, config.study_name, config.widths, candidates=candidates,
                         expected=candidates[1], basis="none")
        plan.notes.append(f"no throughput figure for the {config.evaluator} evaluator: time not estimated")
        return [plan]
    first = known_first(config, space, echo=lambda _: None)
    patterns, known = _representatives(config, first)
    plan = _lm_stage("stage 0", config.budget, config.study_name, candidates, candidates[1], config, patterns, known,
                     None, model)
    if count > 1:
        plan.notes.append(f"the {config.strategy} strategy runs up to {count} stages; only the first is estimated")
    return [plan]


def plan_search(config: SearchConfig, device: Device | None = None) -> dict[str, Any]:
    """The plan of ``config``'s search on ``device`` (default: this machine's), as a JSON-able dict."""
    from search.engine import visible_gpu, worker_placement
    from search.spaces import build_space
    from search.storage import default_storage_url

    if device is None:
        device = Device.here()
    elif config.precision == "auto":  # planned for another machine: what auto resolves to there (and its study names)
        config = dataclasses.replace(config, precision="bf16" if device.kind == "cuda" else config.resolved_precision)
    model = SecondsModel(device, config.workers)
    halving = config.strategy == "successive-halving"
    stages = _halving_stages(config, model) if halving else _single_stage(config, model)
    placement = worker_placement(config.workers, device.count, device.cpus)
    workers = [{"worker": i, "gpu": None if gpu is None else visible_gpu(gpu), "threads": threads}
               for i, (gpu, threads) in enumerate(placement)]
    timed = [s for s in stages if s.wall_seconds is not None]
    wall = sum(s.wall_seconds for s in timed) if timed else None
    low = sum(s.wall_seconds * UNCERTAINTY.get(s.basis, (1, 1))[0] for s in timed) if timed else None
    high = sum(s.wall_seconds_most * UNCERTAINTY.get(s.basis, (1, 1))[1] for s in timed) if timed else None
    hours = sum(s.device_hours or 0 for s in timed) if device.kind == "cuda" and timed else None
    tiny = bool(timed) and all(s.run_seconds < TINY_RUN_S for s in timed if s.name != "recall probe")
    storage = config.storage or default_storage_url(config.out)
    return {
        "strategy": config.strategy,
        "ladder": config.budget if halving else None,
        "evaluator": config.evaluator,
        "trials": config.trials,
        "space": build_space(config.space, config.layers, config.primitives).describe,  # "6-layer AM"
        "widths": config.widths,
        "target": config.report_target,
        "precision": config.resolved_precision,
        "equal_cost": _equal_cost(config),
        "device": {**dataclasses.asdict(device), "describe": device.describe()},
        "workers": workers,
        "parallel": model.parallel,
        "stages": [stage.as_dict() for stage in stages],
        "wall_seconds": wall,
        "wall_seconds_range": [low, high] if timed else None,
        "device_hours": hours,
        "device_hours_range": ([hours * low / wall, hours * high / wall] if hours and wall else None),
        "basis": basis_lines(device, stages, tiny, config.workers, config.primitives),
        "storage": storage,
        "studies": [stage.study for stage in stages],
        "resumes": stored_trials(storage, [stage.study for stage in stages], config.out),
        "out": config.out,
    }


def basis_lines(device: Device, stages: list[StagePlan], tiny: bool, workers: int = 1,
                primitives: str = "AM") -> list[str]:
    """What the estimate rests on, in the words the printed plan uses."""
    lines = ["work: search eta's FLOPs count (forward + backward per trained token, a third per held-out token; "
             "the mean over the known layouts a rung trains, as built at its widths); a rung counts its best "
             "keep and the known layouts (as search eta does), the range's top every candidate and run it may add"]
    if workers > 1:
        lines.append(f"each stage spawns its {workers} workers anew (imports, building the evaluator: tens of "
                     "seconds a stage), not counted")
    if device.kind == "cuda":
        lines.append("speed: a step is the longer of its kernel launches (aten ops x 13.8 us, timed on rung-gpu-0's "
                     "AMAMAM on an H200) and its FLOPs at 40% of the bf16 peak (10% below llama-350m widths), "
                     "+1 s a run; only rung 0 of the gpu ladder has been timed on a GPU: rungs at other widths x0.5-x2, "
                     "timed ones x0.7-x1.5")
    else:
        lines.append("speed: FLOPs/s per core measured for the default search (the cpu ladder on 2 idle cores: 85 "
                     "GFLOP/s at search-1m, 131 at demo-4m), scaled by each worker's threads; x0.7-x1.5")
        if set(primitives) & set(SLOW_ON_CPU):
            lines.append("speed: measured on A/M patterns; " + ", ".join(sorted(set(primitives) & set(SLOW_ON_CPU)))
                         + " run many small ops on the CPU and train slower per FLOP (SMSAMS: 3,900 tok/s at "
                         "rung-cpu-0 on 2 idle cores, about a third of the A/M rate this plan assumes): expect "
                         "longer, up to about x3 for the rungs they dominate")
    if tiny:
        lines.append("runs of a few seconds: their fixed costs (imports, spawning workers, model builds, "
                     "validation) dominate and are not in the estimate; expect minutes")
    if any(stage.name == "recall probe" for stage in stages):
        lines.append("recall probe: about 10 min per finalist on 2 CPU cores (not timed on a GPU)")
    return lines


def stored_trials(storage: str, studies: list[str], out: str) -> dict[str, int] | None:
    """Finished trials already in each study, where ``storage`` is a file that exists (a re-run resumes them);
    None for a database server (the plan does not connect to one) or a storage not yet written."""
    from search.storage import JOURNAL_SUFFIXES

    path = storage.removeprefix("journal:") if storage.startswith("journal:") or storage.endswith(
        JOURNAL_SUFFIXES) else storage.removeprefix("sqlite:///") if storage.startswith("sqlite:///") else None
    if path is None or not Path(path).is_file():
        return None
    import optuna

    from search.storage import make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    backend = make_storage(storage, out)
    names = {summary.study_name for summary in optuna.get_all_study_summaries(backend, include_best_trial=False)}
    found = {}
    for name in studies:
        if name in names:
            study = optuna.load_study(study_name=name, storage=backend)
            found[name] = sum(t.state.is_finished() for t in study.get_trials(deepcopy=False))
    return found


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes = seconds / 60
    if minutes < 1:
        return "<1 min"
    if minutes < 90:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.1f} h"


def _span(pair) -> str:
    return f"{pair[0]}" if pair[0] == pair[1] else f"{pair[0]}-{pair[1]}"


def _equal_cost(config: SearchConfig) -> dict[str, Any] | None:
    """What ``--equal-cost`` grows every model at the target to (``scaling.equal_cost.describe``), or None."""
    if config.growth.equal_cost is None:
        return None
    from scaling.equal_cost import describe

    return describe(config.growth.equal_cost, config.report_target)


def plan_text(plan: dict[str, Any]) -> str:
    """The plan as ``composer search --plan`` prints it."""
    device = plan["device"]
    cuda = device["kind"] == "cuda"
    rungs = sum(stage["name"].startswith("rung") for stage in plan["stages"])
    how = (f" on the {plan['ladder']} ladder ({rungs} rungs)" if plan["ladder"]
           else f" ({plan['evaluator']} evaluator, budget {plan['stages'][0]['budget']})")
    lines = [f"plan: {plan['strategy']}{how}, {plan['trials']} candidates of {plan['space']} patterns at "
             f"{plan['widths']}, answer at {plan['target']}, {plan['precision']}; nothing trains with --plan",
             f"device: {device['describe']}"]
    if plan.get("equal_cost"):
        from scaling.equal_cost import describe_line

        lines.append(describe_line(plan["equal_cost"]))
    workers, threads = plan["workers"], plan["workers"][0]["threads"]
    if cuda:
        mapping = ", ".join(f"{w['worker']}->GPU {w['gpu']}" for w in workers[:8])
        more = f", ... ({len(workers)} in all)" if len(workers) > 8 else ""
        lines.append(f"workers: {len(workers)} ({mapping}{more}); each sees its GPU as cuda:0 and runs "
                     f"{threads} CPU thread(s)")
    else:
        lines.append(f"workers: {len(workers)} on the CPU, {threads} thread(s) each")
    lines.append(f"  {'stage':<13}{'budget':<23}{'trains at':<11}{'tokens/run':>13}{'seq':>6}{'candidates':>12}"
                 f"{'runs each':>16}{'runs':>7}{'wall':>9}" + (f"{'GPU-h':>8}" if cuda else ""))
    for s in plan["stages"]:
        tokens = f"{s['tokens'] - s['start_tokens']:,}" + ("+" if s["start_tokens"] else "") if s["tokens"] else "-"
        each = _span(s["runs"]) + (f" ({s['rates']} lr x {s['seeds']})" if s["rates"] else "")
        hours = ("" if not cuda else f"{s['device_hours']:8.1f}" if s["device_hours"] is not None else f"{'-':>8}")
        lines.append(f"  {s['name']:<13}{s['budget']:<23}{s['preset'] or '-':<11}{tokens:>13}{s['seq_len'] or '-':>6}"
                     f"{_span(s['candidates']):>12}{each:>16}{_span(s['total_runs']):>7}"
                     f"{_duration(s['wall_seconds']):>9}{hours}")
        lines += [f"      {s['name']}: {note}" for note in s["notes"]]
    if plan["wall_seconds"] is not None:
        low, high = plan["wall_seconds_range"]
        total = f"total: about {_duration(plan['wall_seconds'])} wall ({_duration(low)} to {_duration(high)})"
        if plan["device_hours"] is not None:
            hlow, hhigh = plan["device_hours_range"]
            total += (f"; {plan['device_hours']:.1f} GPU-hours, {plan['parallel']} GPU(s) held throughout "
                      f"({hlow:.1f} to {hhigh:.1f})")
        lines.append(total)
    lines += [f"estimate: {line}" for line in plan["basis"]]
    lines.append(f"storage: {plan['storage']}")
    resumes = plan["resumes"] or {}
    lines += [f"  study {study}" + (f" ({resumes[study]} finished trials stored)" if study in resumes else "")
              for study in plan["studies"]]
    lines.append("re-running the same command resumes these studies (a finished candidate is not trained again); "
                 "workers on other hosts join them with the same --storage (a database server) and settings")
    return "\n".join(lines)
