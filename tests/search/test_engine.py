"""The search engine on a cheap deterministic evaluator (toy_evaluator.py): samplers, resume, failures, workers."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from composer.cli import main
from search.config import SearchConfig
from search.engine import Stage, run_worker
from search.resume import is_evaluation
from search.run import run_search
from search.space import SearchSpace

TOY = "toy_evaluator:make"


def config(tmp_path: Path, **kwargs) -> SearchConfig:
    """The toy's optimum AAMMMM is also the paper's known layout: these tests search without known layouts (their
    own tests are in test_known.py), so that finding the optimum is the sampler's doing."""
    return SearchConfig(**{"evaluator": TOY, "budget": "smoke", "wandb": "off", "out": str(tmp_path / "out"),
                           "known": False, **kwargs})


def trained(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def assert_trained_once(log: Path, failing: set[str]) -> None:
    """A pattern is trained once; one that fails gets one retry (it might have run out of memory), then it is a
    deterministic failure and never trained again."""
    counts = {pattern: trained(log).count(pattern) for pattern in set(trained(log))}
    assert all(n == 1 or (n == 2 and pattern in failing) for pattern, n in counts.items()), counts


@pytest.mark.parametrize("sampler", ["gp", "tpe", "random", "brute"])
def test_each_sampler_finds_good_patterns_and_writes_results(tmp_path, monkeypatch, sampler):
    log = tmp_path / "trained.log"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    result = run_search(config(tmp_path, sampler=sampler, trials=14), echo=lambda _: None)
    out = Path(result["out"])
    rows = json.loads((out / "leaderboard.json").read_text())
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert all({"rank", "pattern", "score", "params"} <= set(r) for r in rows)
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert json.loads((out / "best.json").read_text())["pattern"] == rows[0]["pattern"]
    assert (out / "leaderboard.csv").read_text().splitlines()[0].startswith("rank,pattern,compact,score,known,lr,params")
    for plot in ("optimization_history", "score_vs_attention_share", "layer_frequency_top"):
        assert (out / f"{plot}.png").stat().st_size > 1000
    assert_trained_once(log, {f["pattern"] for f in json.loads((out / "failures.json").read_text())})


def trainings_to_optimum(tmp_path: Path, sampler: str, seed: int, budget: int) -> int | None:
    """How many patterns the engine's ``sampler`` trains (answers from the study's cache are free) before it trains
    the toy's optimum AAMMMM, within ``budget`` trainings; None if it never does. The engine's own worker runs the
    study (its sampler, seeding and objective), stopped as soon as the optimum is trained."""
    cfg = config(tmp_path / f"{sampler}-{seed}", sampler=sampler, trials=budget, seed=seed)
    trained_patterns = []

    def stop_at_optimum(study, trial):
        if is_evaluation(trial):
            trained_patterns.append(trial.user_attrs["pattern"])
        if trial.user_attrs.get("pattern") == "AAMMMM":
            study.stop()

    run_worker(cfg, Stage(0, SearchSpace(6, "AM"), budget, f"quality-{sampler}-{seed}"), 0,
               callbacks=[stop_at_optimum])
    return trained_patterns.index("AAMMMM") + 1 if "AAMMMM" in trained_patterns else None


@pytest.mark.parametrize("sampler", ["gp", "tpe"])
def test_model_based_samplers_find_the_exact_optimum_where_random_picks_would_not(tmp_path, sampler):
    """The 64 patterns of 6 A/M layers hold one optimum. Patterns picked at random without repeats reach it within
    14 trainings with probability 14/64 per seed, so on all four seeds 0.2% of the time; GP (after its 4 random
    startup trials) and TPE follow the score to it on every seed (measured: GP in 5, 9, 5 and 7 trainings, TPE in
    7, 12, 8 and 13). A sampler that ignores the scores fails: with RandomSampler in their place, seed 0 does not
    reach the optimum in 14."""
    found = {seed: trainings_to_optimum(tmp_path, sampler, seed, budget=14) for seed in range(4)}
    assert None not in found.values(), f"{sampler} missed the optimum within 14 trainings: {found}"


def test_failures_are_recorded_with_reasons_and_the_search_goes_on(tmp_path):
    space_with_failures = config(tmp_path, sampler="brute", trials=64, min_share={}, max_share={})
    result = run_search(space_with_failures, echo=lambda _: None)
    failures = json.loads((Path(result["out"]) / "failures.json").read_text())
    reasons = {f["pattern"]: f["reason"] for f in failures}
    assert "five MLPs in a row" in reasons["MMMMMM"]
    assert "non-finite score nan" in reasons["AMAMAM"]
    assert len(result["leaderboard"]) == 64 - len(failures)
    assert result["best"]["pattern"] == "AAMMMM"


def test_patterns_the_evaluator_trains_as_one_model_are_trained_once_and_share_its_score(tmp_path, monkeypatch):
    # the recall probe trains a pattern's mixers alone: SDDMDM and SMDDDM are both SDDD to it (issue 37's search
    # probed them twice, 7 minutes, with the same result to the last digit)
    log = tmp_path / "trained.txt"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    monkeypatch.setenv("TOY_EVAL_DROP", "M")
    result = run_search(config(tmp_path, sampler="brute", trials=4, layers=2), echo=lambda _: None)
    scores = {row["pattern"]: row["score"] for row in result["leaderboard"]}
    assert set(scores) == {"AA", "AM", "MA", "MM"}  # every pattern is scored ...
    assert sorted(trained(log)) == sorted(["AA", "MM", next(p for p in trained(log) if p in ("AM", "MA"))])
    assert scores["AM"] == scores["MA"]  # ... the twin with the model's score, trained once
    study = optuna.load_study(study_name=result["study"], storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    twin = next(t for t in study.trials if "same_model_as" in t.user_attrs)
    assert twin.user_attrs["pattern"] in ("AM", "MA") and twin.user_attrs["seconds"] == 0.0


def test_a_twin_is_free_it_does_not_take_a_trained_candidates_place_in_the_budget(tmp_path, monkeypatch):
    """``--trials 4`` over 3-layer AM patterns whose evaluator drops M: 8 patterns, 4 models (AAA, two A's, one A,
    none). Counted as an evaluation, a twin took a place in the budget and a model was never trained."""
    log = tmp_path / "trained.txt"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    monkeypatch.setenv("TOY_EVAL_DROP", "M")
    run_search(config(tmp_path, sampler="brute", trials=4, layers=3), echo=lambda _: None)
    assert sorted(pattern.count("A") for pattern in trained(log)) == [0, 1, 2, 3], trained(log)


def test_interrupted_search_resumes_without_losing_or_repeating_trials(tmp_path, monkeypatch):
    log = tmp_path / "trained.log"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    cfg = config(tmp_path, sampler="tpe", trials=12)

    import search.engine as engine

    real_objective = engine.make_objective

    def interrupting_objective(*args, **kwargs):
        objective = real_objective(*args, **kwargs)
        calls = {"n": 0}

        def wrapped(trial):
            calls["n"] += 1
            if calls["n"] == 6:
                raise KeyboardInterrupt  # Ctrl-C in the middle of the sixth trial
            return objective(trial)

        return wrapped

    monkeypatch.setattr(engine, "make_objective", interrupting_objective)
    with pytest.raises(KeyboardInterrupt):
        run_search(cfg, echo=lambda _: None)
    storage = f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    before = optuna.load_study(study_name=cfg.study_name, storage=storage)
    completed_before = {t.number: t.value for t in before.get_trials(states=(optuna.trial.TrialState.COMPLETE,))}
    assert len(completed_before) >= 4

    monkeypatch.setattr(engine, "make_objective", real_objective)
    run_search(cfg, echo=lambda _: None)  # the same command again
    after = optuna.load_study(study_name=cfg.study_name, storage=storage)
    completed_after = {t.number: t.value for t in after.get_trials(states=(optuna.trial.TrialState.COMPLETE,))}
    assert completed_before.items() <= completed_after.items(), "a completed trial was lost or changed"
    finished = [t for t in after.trials if t.state != optuna.trial.TrialState.RUNNING]
    # the budget counts evaluations (the interrupted trial, recorded as failed, among them), not cached answers
    assert sum(is_evaluation(t) for t in finished) == 12 <= len(finished)
    interrupted = [t for t in finished if t.state == optuna.trial.TrialState.FAIL and "fail_reason" not in t.user_attrs]
    assert len(interrupted) == 1
    assert_trained_once(log, {t.user_attrs.get("pattern") for t in after.trials if "fail_reason" in t.user_attrs})


def test_a_trial_left_running_by_a_kill_before_its_worker_was_recorded_is_failed_on_rerun(tmp_path):
    """The CI flake of issue 13's kill test, made deterministic: a process killed between Optuna creating a trial
    and the objective's first line leaves it RUNNING with no worker and no heartbeat. The next run on the study is
    its only worker (the study lock says so), so it fails that trial instead of leaving it RUNNING for ever."""
    cfg = config(tmp_path, sampler="random", trials=3)
    storage = f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    (tmp_path / "out").mkdir()
    orphan = optuna.create_study(storage=storage, study_name=cfg.study_name, direction="maximize").ask()
    run_search(cfg, echo=lambda _: None)
    trials = optuna.load_study(study_name=cfg.study_name, storage=storage).get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    assert "before recording itself" in trials[orphan.number].user_attrs["fail_reason"]


@pytest.mark.parametrize("sampler", ["random", "gp"])
def test_pruner_stops_trials_below_the_median_and_keeps_them_off_the_leaderboard(tmp_path, monkeypatch, sampler):
    monkeypatch.setenv("TOY_EVAL_STEPS", "3")
    result = run_search(config(tmp_path, sampler=sampler, trials=24, min_share={}, max_share={}), echo=lambda _: None)
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    pruned = [t for t in study.trials if "pruned_at" in t.user_attrs]
    assert pruned, "nothing was pruned"
    # never on the first report (warm-up), and only below the median of the earlier trials at that step
    assert all(t.user_attrs["pruned_at"]["step"] >= 1 for t in pruned)
    for t in pruned:
        earlier = [u.intermediate_values[t.user_attrs["pruned_at"]["step"]] for u in study.trials
                   if u.number < t.number and t.user_attrs["pruned_at"]["step"] in u.intermediate_values]
        assert t.user_attrs["pruned_at"]["value"] < sorted(earlier)[len(earlier) // 2] + 1e-9
    # random learns from PRUNED trials; GP gets a completed substitute, flagged and kept off the leaderboard
    expected_state = optuna.trial.TrialState.PRUNED if sampler == "random" else optuna.trial.TrialState.COMPLETE
    assert {t.state for t in pruned} == {expected_state}
    board = {row["trial"] for row in result["leaderboard"]}
    assert not board & {t.number for t in pruned}


@pytest.mark.parametrize("strategy", ["end-incremental", "middle-incremental"])
def test_incremental_strategies_grow_the_best_pattern(tmp_path, strategy):
    cfg = config(tmp_path, strategy=strategy, layers=3, depth=6, sampler="brute", trials=16)
    result = run_search(cfg, echo=lambda _: None)
    best = result["best"]["pattern"]
    assert len(best) == 6
    stage0 = optuna.load_study(study_name=f"{cfg.study_name}-stage0",
                               storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    stage0_best = max((t for t in stage0.trials if t.value is not None), key=lambda t: t.value).user_attrs["pattern"]
    if strategy == "end-incremental":
        assert best.startswith(stage0_best)
    else:
        assert best[:1] == stage0_best[:1] and best.endswith(stage0_best[1:])


def test_constraints_keep_patterns_inside_the_shares(tmp_path):
    result = run_search(config(tmp_path, sampler="brute", trials=64, max_share={"A": 0.34}), echo=lambda _: None)
    assert all(r["pattern"].count("A") <= 2 for r in result["leaderboard"])
    skipped = [f for f in json.loads((Path(result["out"]) / "failures.json").read_text()) if f["state"] == "skipped"]
    assert skipped and all("above the maximum" in f["reason"] for f in skipped)


def test_multi_objective_writes_a_pareto_front(tmp_path):
    result = run_search(config(tmp_path, objectives=["score", "kv"], trials=12), echo=lambda _: None)
    assert (Path(result["out"]) / "pareto_front.png").exists()
    rows = result["leaderboard"]
    assert all(len(row["objectives"]) == 2 for row in rows)
    # the marked rows are exactly the non-dominated ones, recomputed here by brute force
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    signs = [1 if d == optuna.study.StudyDirection.MAXIMIZE else -1 for d in study.directions]
    assert signs == [1, -1]  # the toy score is maximized, the KV cache minimized

    def dominates(a, b):
        better = [s * x for s, x in zip(signs, a["objectives"], strict=True)]
        worse = [s * y for s, y in zip(signs, b["objectives"], strict=True)]
        return all(x >= y for x, y in zip(better, worse)) and better != worse

    front = {row["pattern"] for row in rows if not any(dominates(other, row) for other in rows)}
    assert {row["pattern"] for row in rows if row["pareto"]} == front
    assert 0 < len(front) < len(rows), "a front of every row (or none) would not test the marking"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_workers_share_one_storage(tmp_path, request, backend, monkeypatch, capsys):
    """The search in this process (its two workers are spawned processes all the same), sharing one storage."""
    storage = None if backend == "sqlite" else request.getfixturevalue("postgres_url")
    log = tmp_path / "trained.log"
    argv = ["search", "--evaluator", TOY, "--budget", "smoke", "--trials", "10", "--workers", "2", "--sampler",
            "tpe", "--wandb", "off", "--out", str(tmp_path / "out"), "--json"]
    if storage:
        argv += ["--storage", storage]
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    monkeypatch.setenv("TOY_EVAL_DELAY", "0.3")
    capsys.readouterr()
    code = main(argv)
    said = capsys.readouterr()
    assert code == 0, said.err[-3000:]
    rows = json.loads(said.out)
    assert rows and rows[0]["score"] > 0
    study = optuna.load_study(study_name=json.loads((tmp_path / "out" / "best.json").read_text())["study"],
                              storage=storage or f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    workers = {t.user_attrs.get("worker") for t in study.trials}
    # both workers ran trials; the search's own process may have run one more: the retry of a known layout that
    # failed once (the toy's AMAMAM), which it takes once the workers have ended, so that two cannot both enqueue it
    assert len(workers) in (2, 3), "both workers should have run trials"
    finished = [t for t in study.trials if t.state.is_finished()]
    # each worker stops at the shared budget of evaluations (cached answers are free); one may overshoot by one.
    # Patterns, not trials: a known layout that failed once (the toy's AMAMAM) gets its retry past the budget
    assert 10 <= len({t.user_attrs.get("pattern") for t in finished if is_evaluation(t)}) <= 11
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert_trained_once(log, {t.user_attrs.get("pattern") for t in study.trials if "fail_reason" in t.user_attrs})


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sampler", "cmaes"], "sampler must be one of"),
        (["--strategy", "greedy"], "strategy must be one of"),
        (["--budget", "huge"], "unknown budget 'huge'; choose smoke, cpu or gpu ("),  # not the rungs' names
        (["--evaluator", "mad", "--budget", "huge"], "unknown MAD budget 'huge'"),
        (["--strategy", "successive-halving", "--budget", "paper"], "unknown successive-halving budget 'paper'"),
        (["--strategy", "successive-halving", "--evaluator", "mad"], "add --evaluator lm"),
        (["--evaluator", "nope:thing"], "cannot load evaluator"),
        (["--min-share", "A:0.5"], "--min-share expects SYMBOL=FRACTION"),
        (["--storage", "nonsense"], "neither a database URL"),
    ],
)
def test_usage_errors_are_one_line_exit_2(tmp_path, capsys, argv, message):
    code = main(["search", "--out", str(tmp_path / "out"), "--wandb", "off", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_the_throughput_objective_is_measured_per_pattern_and_optimised_beside_the_score(tmp_path):
    """README: ``--objectives score,tokens_per_s``. Each trial's second value is its own measured tokens/s (the toy
    reports none, so the engine times a real model of the pattern), maximised; attention and MLP differ in speed,
    so the values are not one number copied."""
    result = run_search(config(tmp_path, objectives=["score", "tokens_per_s"], trials=5, sampler="random"),
                        echo=lambda _: None)
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MAXIMIZE"]
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 4
    for trial in done:
        assert trial.values[1] == trial.user_attrs["tokens_per_s"] > 0
    assert len({round(t.values[1]) for t in done}) > 1
    assert all(len(row["objectives"]) == 2 for row in result["leaderboard"])


def test_max_params_keeps_every_trained_pattern_under_the_limit(tmp_path, monkeypatch):
    """README: ``--max-params N`` (non-embedding parameters at the search widths) through the whole engine: no
    pattern over it is trained, each is recorded as skipped with its count, and the patterns under it are."""
    from composer.accounting import analyze
    from composer.presets import get_preset

    widths = get_preset(SearchConfig().widths).arch
    params = {p: analyze(widths.with_pattern(p)).non_embedding_params for p in ("AAAMMM", "AAAAAM", "MMMMMA")}
    assert len(set(params.values())) == 3, "A and M must differ in size for the limit to cut the space"
    limit = params["AAAMMM"]
    log = tmp_path / "trained.log"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    result = run_search(config(tmp_path, sampler="random", trials=8, max_params=limit, min_share={}, max_share={}),
                        echo=lambda _: None)
    trained_patterns = set(trained(log))
    assert trained_patterns and all(
        analyze(widths.with_pattern(p)).non_embedding_params <= limit for p in trained_patterns)
    skipped = [f for f in json.loads((Path(result["out"]) / "failures.json").read_text()) if f["state"] == "skipped"]
    assert skipped and all(f"> --max-params {limit:,}" in f["reason"] for f in skipped)
    assert not {f["pattern"] for f in skipped} & trained_patterns


def test_reopening_a_study_says_nothing(tmp_path, caplog):
    """The coordinator of a --workers 2 search opens the study at every progress poll; Optuna's "Using an
    existing study" note came every 2 s of the log (14 in 30 s of an AMSD search) until open_study silenced it."""
    from search.engine import open_study
    from search.evaluators import make_evaluator

    settings = config(tmp_path)
    stage = Stage(0, SearchSpace(settings.layers, settings.primitives), 1, settings.study_name)
    evaluator = make_evaluator(settings.evaluator, settings.budget, settings.widths)
    optuna.logging.set_verbosity(optuna.logging.INFO)
    optuna.logging.enable_propagation()
    try:
        for _ in range(3):
            open_study(settings, stage, evaluator)
    finally:
        optuna.logging.disable_propagation()
    assert "Using an existing study" not in caplog.text


def test_a_data_error_stops_the_search_at_once_and_a_rerun_after_the_fix_trains(tmp_path, monkeypatch):
    """Issue 47: every candidate failed on the same missing text field, then a traceback; after the data was fixed
    the same command failed at once, each failure stored as a pattern's own and the budget used up. The first
    DataError now ends the search on its one line (exit 2), and the stored one is no evaluation and no failure of
    its pattern: the re-run trains."""
    from composer.data.errors import DataError

    broken = tmp_path / "broken-data"
    broken.write_text("")
    log = tmp_path / "trained.log"
    monkeypatch.setenv("TOY_EVAL_DATA_ERROR", str(broken))
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    settings = config(tmp_path, sampler="random", trials=3)
    with pytest.raises(DataError, match="toy data: text field 'text' not found"):
        run_search(settings, echo=lambda _: None)
    assert len(trained(log)) == 1, "stopped at the first candidate, not after every one failed alike"
    broken.unlink()  # the data is fixed
    result = run_search(settings, echo=lambda _: None)
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    assert sum(is_evaluation(t) for t in study.get_trials()) == 3 and result["leaderboard"]


def test_a_pattern_that_failed_on_the_data_is_trained_again_and_one_skipped_by_a_constraint_is_not():
    """A study left by a data error (each known layout failed twice on it, the second time marked deterministic)
    owes its patterns their training; a transient failure twice the same way does not, nor does a pattern a
    constraint skipped (enqueued anew, it was skipped up to 4 times, a W&B run each)."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from search.engine import needs_training

    params = SearchSpace(6, "AM").params_of("AAMMMM")
    kinds = {name: CategoricalDistribution(["A", "M"]) for name in params}

    def trial(state, **attrs):
        return create_trial(state=state, params=params, distributions=kinds, value=None if state != TrialState.COMPLETE
                            else 1.0, user_attrs={"pattern": "AAMMMM", **attrs})

    on_data = "DataError: text field 'text' not found in 'notes.jsonl' (1 JSON file); available fields: body"
    data_study = [trial(TrialState.FAIL, fail_reason=on_data), trial(TrialState.FAIL, fail_reason=on_data),
                  trial(TrialState.FAIL, fail_reason=f"as in trial 0, 1: {on_data}", deterministic_failure=True)]
    assert needs_training(data_study, params) and not any(is_evaluation(t) for t in data_study)
    out_of_memory = [trial(TrialState.FAIL, fail_reason="OutOfMemoryError: CUDA out of memory")] * 2
    assert not needs_training(out_of_memory, params)
    skipped = [trial(TrialState.PRUNED, skip_reason="cache@32K at target 12.0 MiB > --max-kv 9.5 MiB")]
    assert not needs_training(skipped, params)
