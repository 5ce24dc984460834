"""Progress lines of a search: a rung's label counts as the summary, rungs.json and the study names count; while a
candidate trains, heartbeat lines say where the search is and how long it has left."""

from __future__ import annotations

import functools
import itertools
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from search.config import SearchConfig
from search.engine import Stage
from search.progress import SearchEta, SearchProgress, stage_label, worker_heartbeat
from search.run import summary_text
from search.strategies import get_strategy
from search.strategies.base import known_first, make_space
from search.strategies.successive_halving import rung_config


def test_rung_labels_count_from_zero_like_the_summary():
    """Issue 34: the smoke search printed ``rung 1/2`` and ``rung 2/2`` above a summary of ``rungs: 0: ..., 1: ...``,
    so one rung had two numbers."""
    row = {"rank": 1, "pattern": "AMAM", "compact": "(AM)x2", "score": 1.5, "lr": 1e-3, "params": 10,
           "attention_share": 0.5, "trial": 0, "known": None}
    rungs = [{"rung": index, "candidates": 3 - index, "budget": f"rung-smoke-{index}", "seconds": 60.0}
             for index in range(2)]
    summary = summary_text({"leaderboard": [row], "best": row, "out": "runs/search", "rungs": rungs})
    summarised = [int(n) for n in re.findall(r"(\d+): \d+ at rung-smoke", summary)]
    labels = [stage_label("rung", index, len(rungs)) for index in range(len(rungs))]
    assert labels == ["rung 0 of 0-1", "rung 1 of 0-1"]
    assert [int(label.split()[1]) for label in labels] == summarised == [0, 1]


# --- while a candidate trains (issue 36: README's default search printed nothing for 150 s) ---------------------

ROOT = Path(__file__).resolve().parents[2]
PROMOTED = ("AMAMAM", "MMAMMM", "MMAAMM", "MMAMMA", "MAAMMM", "MAMMMM", "MMAAMA", "MAMAMM", "MAAAMA")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Lines(list):
    def write(self, text: str) -> None:
        self.extend(line for line in text.splitlines() if line)

    def flush(self) -> None:
        pass


def default_search(clock: Clock) -> tuple[SearchConfig, SearchEta]:
    """README's default search: successive halving over the cpu ladder, 20 candidates of A and M."""
    config = SearchConfig(wandb="off")
    assert (config.strategy, config.budget, config.trials) == ("successive-halving", "cpu", 20)
    return config, SearchEta(config, get_strategy(config.strategy), now=clock)


def rung_stage(config: SearchConfig, index: int, patterns: tuple[str, ...]) -> Stage:
    space = make_space(config, config.layers)
    if index == 0:
        return Stage(0, space, config.trials, "s", known_first(config, space, lambda _: None))
    # the promoted patterns as a search promotes them: Llama's alternation carries its known layout's name (the
    # floor every later rung keeps, which the ETA counts)
    first = tuple((p, {"known": "llama"} if p == "AMAMAM" else {}) for p in patterns)
    return Stage(index, space, len(patterns), f"s-rung{index}", first, only_first=True)


def report(pattern: str, run: int, runs: int, tokens: int, budget: int, per_step: int, speed: float | None) -> dict:
    return {"pattern": pattern, "lr": (1e-3, 2e-3)[run - 1] if run <= 2 else 1e-3, "seed": 0, "budget": "b",
            "budget_tokens": budget, "tokens_per_step": per_step, "run": run, "runs": runs, "step": tokens // per_step,
            "steps": budget // per_step, "tokens": tokens, "total_tokens": budget, "tokens_per_s": speed}


def test_a_heartbeat_line_names_the_rung_the_candidate_its_tokens_and_the_etas():
    clock, lines = Clock(), Lines()
    config, eta = default_search(clock)
    stage = rung_stage(config, 1, PROMOTED)
    eta.plan(1, rung_config(config, 1), stage)
    progress = SearchProgress(9, False, "rung 1 of 0-2 ", stream=lines, kind="rung", index=1, eta=eta, done=2,
                              now=clock)
    progress.begin()
    assert lines == ["rung 1 of 0-2 [  3/9] training: 2 run(s) of 124,928 tokens at demo-4m; a progress line every "
                     "~10 s"]
    SearchProgress(9, False, "rung 1 of 0-2 ", stream=lines, eta=eta, done=9).begin()  # a finished rung, resumed
    assert len(lines) == 1
    trained = "MMAMMMMMAMMM"
    progress.heartbeat(report(trained, 1, 2, 62_000, 125_000, 2048, 2310.0))
    line = lines[-1]
    match = re.fullmatch(r"rung 1 of 0-2 \[  3/9\] MMAMMMMMAMMM  run 1/2 lr 1e-3  62,000/124,928 tokens  2,310 tok/s"
                         r"  rung eta (\d+):(\d\d)  search eta ~(\d+) min", line)
    assert match, line
    rung_s = int(match[1]) * 60 + int(match[2])
    # 7 more candidates of 2 runs and the rest of this one, at 2,310 tokens/s: about 16 runs of ~125K tokens (+ the
    # held-out scoring) is 15-20 min; the last rung (4 x 400K tokens) comes on top
    assert 12 * 60 < rung_s < 25 * 60, line
    assert rung_s / 60 < int(match[3]) < 3 * rung_s / 60, line
    clock.t += 5  # the same run 5 s later: no line (the training's Heartbeat reports every 10 s, and at its end)
    progress.heartbeat(report(trained, 1, 2, 72_000, 125_000, 2048, 2310.0))
    assert len(lines) == 2
    clock.t += 5
    progress.heartbeat(report(trained, 1, 2, 84_000, 125_000, 2048, 2310.0))
    assert len(lines) == 3 and "84,000/124,928 tokens" in lines[-1]
    clock.t += 1  # a new run prints at its first report
    progress.heartbeat(report(trained, 2, 2, 2_048, 125_000, 2048, 2310.0))
    assert len(lines) == 4 and "run 2/2 lr 2e-3  2,048/124,928" in lines[-1]
    progress.done = 3  # the candidate finished: the next is number 4, at once
    progress.heartbeat(report("MMAAMMMMAAMMMAM", 1, 2, 2_048, 125_000, 2048, 2310.0))
    assert lines[-1].startswith("rung 1 of 0-2 [  4/9] MMAAMMMMAAMMMAM  run 1/2")


def test_the_search_eta_of_the_rungs_counts_the_recall_probe_and_the_confirmation_after_them():
    """The AMSD search under --min-recall and --confirm-seeds 3 said "search eta ~17 min" in its last rung with the
    probe of 8 finalists and 4 confirmation runs, about 2 hours, still to come."""
    import torch

    from search.progress import PROBE_CORE_SECONDS

    def search_left(**settings) -> float:
        clock = Clock()
        config = SearchConfig(wandb="off", **settings)
        eta = SearchEta(config, get_strategy(config.strategy), now=clock)
        eta.plan(2, rung_config(config, 2), rung_stage(config, 2, PROMOTED[:4]))
        eta.update(2, 1, 4, report(PROMOTED[0], 1, 1, 100_352 + 2048, 499_712, 2048, 1000.0))
        clock.t += 10
        return eta.update(2, 1, 4, report(PROMOTED[0], 1, 1, 100_352 + 12_288, 499_712, 2048, 1000.0))[1]

    plain = search_left()
    probed = search_left(min_recall="known")
    assert probed - plain == pytest.approx(4 * PROBE_CORE_SECONDS / torch.get_num_threads())
    confirmed = search_left(confirm_seeds=3)
    # 2 finalists x 2 more seeds from scratch (500K tokens each) against the rung's 4 continued from 100K tokens
    assert 0.8 < (confirmed - plain) / plain < 2.0, (plain, confirmed)


def test_a_rung_numbers_its_promoted_candidates_and_a_sampled_stage_what_it_trained():
    """A rung resumed after its promotions changed said "[15/14]": the finished trial of a pattern no longer
    promoted (a twin left out) still counted. A rung numbers its promoted patterns, however each was answered."""
    import optuna
    from optuna.trial import TrialState

    from search.progress import stage_done

    def trial(pattern: str, state=TrialState.COMPLETE, **attrs):
        return optuna.trial.create_trial(state=state, value=1.0 if state == TrialState.COMPLETE else None,
                                         user_attrs={"pattern": pattern, **attrs})

    finished = [trial("SDDDDM"), trial("SDDASM"), trial("SDDDSA"), trial("SADDSM", same_model_as=1),
                trial("SMDDDM"),
                trial("SDDADM", TrialState.FAIL, worker_died="its worker died", fail_reason="its worker died")]
    promoted = frozenset({"SDDDDM", "SADDSM", "SMDDDM", "SDDADM", "SADDDD"})
    # SDDASM and SDDDSA were left out, SADDSM was answered by its twin, SDDADM's worker died (it trains again)
    assert stage_done(finished, promoted) == 3
    assert stage_done(finished) == 4  # a sampled stage counts what trained: the twin is free, the dead one retried


def flops(pattern: str, widths: str) -> float:
    from composer.accounting import analyze
    from composer.presets import resolve_architecture
    from scaling.extrapolate import extrapolate

    trained = extrapolate(pattern, widths, method="auto").pattern if widths != "search-1m" else pattern
    return analyze(resolve_architecture(trained, widths, widths)[0], seq_len=128).flops_per_token


def test_the_search_eta_of_the_default_ladder_shrinks_as_it_trains_and_is_plausible():
    """The whole default search, simulated at a constant 5.5e10 FLOP/s (about 10,000 tokens/s on rung 0's models:
    the 2-core CPU of ``benchmarks/results/default_search_am_e2e-2026-11-26.json``, whose search took 1 h 02 min,
    rung 2 then trained from scratch) plus 3 s of start-up per run that no FLOP count sees."""
    clock, lines = Clock(), Lines()
    config, eta = default_search(clock)
    patterns = ["AMAMAM", "AAMMMM"] + ["".join(p) for p in itertools.product("MA", repeat=6)
                                       if "".join(p) not in ("AMAMAM", "AAMMMM")][:18]
    ladder = [(patterns, 100_000 // 1024 * 1024, 0, 2, 1024, "search-1m"),  # trained tokens, start, runs, per step
              (PROMOTED, 124_928, 0, 2, 2048, "demo-4m"),
              # continued from rung 1's trunks: two rates where rung 1 chose its higher one (keeps_lower_trunks)
              (PROMOTED[:4], 499_712, 100_352, (2, 1, 2, 1), 2048, "demo-4m")]
    flop_rate, startup = 5.5e10, 3.0
    estimates = []  # (when, search seconds left) at each candidate's first report
    for index, (stage_patterns, budget, start, rung_runs, per_step, widths) in enumerate(ladder):
        stage = rung_stage(config, index, tuple(stage_patterns))
        eta.plan(index, rung_config(config, index), stage)
        progress = SearchProgress(len(stage_patterns), False, f"rung {index} of 0-2 ", stream=lines, kind="rung",
                                  index=index, eta=eta, now=clock)
        for number, pattern in enumerate(stage_patterns):
            speed = flop_rate / flops(pattern, widths)  # tokens/s of this candidate
            runs = rung_runs[number] if isinstance(rung_runs, tuple) else rung_runs
            for run in range(1, runs + 1):
                clock.t += startup
                tokens, first = start, True
                while tokens < budget:
                    step = min(budget - tokens, 10 * speed)
                    clock.t += step / speed
                    tokens += step
                    progress.heartbeat(report(pattern, run, runs, int(tokens), budget, per_step, speed))
                    if first and run == 1:
                        match = re.search(r"search eta (<1|~(\d+) h (\d+)|~(\d+)) min", lines[-1])
                        assert match, lines[-1]
                        left = 0 if match[1] == "<1" else (int(match[2]) * 60 + int(match[3]) if match[2]
                                                           else int(match[4]))
                        estimates.append((clock.t, left * 60.0))
                    first = False
            progress.done = number + 1
    took = clock.t - 1000.0
    assert len(estimates) == 20 + 9 + 4
    # plausible: the first estimate, 13 s into the search, is within a factor of 2 of the truth and of the order
    # of the measured search (1 h 02 min)
    assert 0.5 * took < estimates[0][1] < 2 * took and 20 * 60 < estimates[0][1] < 3 * 3600, (took, estimates[0])
    # and it shrinks as the work is done: never up by more than a tenth, and to almost nothing at the end
    for (_, before), (_, after) in itertools.pairwise(estimates):
        assert after <= 1.1 * before + 60, estimates
    assert estimates[-1][1] < 0.15 * estimates[0][1]
    for when, left in estimates[1:]:  # once it has measured a candidate: within a factor of 1.5 of the time left
        assert (took - (when - 1000.0)) / 1.5 - 60 <= left <= 1.5 * (took - (when - 1000.0)) + 60, (when, left)


@pytest.mark.slow
def test_a_workers_heartbeat_names_the_worker_its_run_and_speed_and_no_eta():
    # a spawned worker sees only its own runs: which candidate of the stage it trains, and the search's time left,
    # are the search process's lines to say
    clock, lines = Clock(), Lines()
    progress = SearchProgress(8, False, "recall probe: ", stream=lines, worker=2, now=clock)
    progress.heartbeat(report("SADDDD", 1, 1, 1_212_416, 4_096_000, 4096, 1650.0))
    assert lines == ["recall probe: worker 2  SADDDD  run 1/1 lr 1e-3  1,212,416/4,096,000 tokens  1,650 tok/s"]
    clock.t += 5
    progress.heartbeat(report("SADDDD", 1, 1, 1_220_608, 4_096_000, 4096, 1650.0))
    assert len(lines) == 1  # within ~10 s of the same run
    progress.heartbeat(report("SMSAMS", 1, 1, 4_096, 4_096_000, 4096, 1650.0))  # its next finalist prints at once
    assert len(lines) == 2 and lines[-1].startswith("recall probe: worker 2  SMSAMS  run 1/1")
    # what search.run hands launch_workers crosses a spawn, and numbers the workers from 1
    factory = pickle.loads(pickle.dumps(functools.partial(worker_heartbeat, "rung 0 of 0-1 ", 3)))
    assert factory(0).__self__.worker == 1 and factory(0).__self__.label == "rung 0 of 0-1 "


def stream_search(argv: list[str], until: re.Pattern, timeout: float = 600) -> list[tuple[float, str]]:
    """``composer search ARGV``'s stderr lines (with when each came) up to the first that ``until`` finds; the
    search is stopped there."""
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-m", "composer", "search", *argv], cwd=ROOT, env=env, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    seen: list[tuple[float, str]] = []

    def read() -> None:
        for line in process.stderr:
            seen.append((time.monotonic(), line.rstrip("\n")))
            if until.search(line):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=timeout)
    try:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the search and its spawned workers
            process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return seen


def test_a_real_smoke_search_shows_a_heartbeat_before_its_first_candidate_ends(tmp_path):
    """``composer search --budget smoke --trials 3``: a line with the rung, the candidate, its tokens and the ETAs
    comes while the first candidate trains, before its result line. Stopped once that result is printed."""
    result = re.compile(r"rung 0 of 0-1 \[  1/3\] \S+ +score \d")
    started = time.monotonic()
    seen = stream_search(["--budget", "smoke", "--trials", "3", "--out", str(tmp_path / "out")], result)
    text = [line for _, line in seen]
    ends = [i for i, line in enumerate(text) if result.search(line)]
    assert ends, "\n".join(text[-30:])
    beats = [i for i, line in enumerate(text[:ends[0]]) if re.fullmatch(
        r"rung 0 of 0-1 \[  1/3\] [AM]{6}  run 1/1 lr 3e-3  [\d,]+/8,192 tokens  [\d,]+ tok/s  rung eta \d+:\d\d"
        r"  search eta (~\d+|<1) min", line)]
    assert beats, "\n".join(text[:ends[0] + 1])
    announced = [i for i, line in enumerate(text) if line.startswith("rung 0 of 0-1 [  1/3] training: 1 run(s) of "
                                                                      "8,192 tokens at search-1m")]
    assert announced and announced[0] < beats[0]
    print("\n".join(text[announced[0]:ends[0] + 1]))
    print(f"first heartbeat line {seen[beats[0]][0] - started:.0f} s after start, result at "
          f"{seen[ends[0]][0] - started:.0f} s")


def test_a_real_two_worker_search_shows_each_workers_runs_as_they_train(tmp_path):
    """``composer search --workers 2``: the candidates train in spawned processes, and a line of their runs (named by
    the worker) comes before the first result; before, such a search was silent until a candidate ended. Stopped at
    the first of the two."""
    beat = r"rung 0 of 0-1 worker [12]  [AM]{6}  run 1/1 lr 3e-3  [\d,]+/8,192 tokens  [\d,]+ tok/s"
    result = r"rung 0 of 0-1 \[ +\d/3\] \S+ +score \d"
    seen = stream_search(["--budget", "smoke", "--trials", "3", "--workers", "2", "--out", str(tmp_path / "out")],
                         re.compile(f"^{beat}$|{result}"))
    text = [line for _, line in seen]
    assert text and re.fullmatch(beat, text[-1]), "\n".join(text[-30:])
