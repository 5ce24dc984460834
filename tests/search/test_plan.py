"""``composer search --plan`` (search.plan) and the GPU recipes it plans: recipes/search/gpu-halving-*.yaml.

The plan's counts are checked against the ladder's own definitions (search.fidelity, search.lm), not copies of
them; the recipes run end to end on the CPU at tiny widths with the smoke ladder, the 1-node one with 2 workers,
the multi-host one as two processes sharing one storage (a journal file here: the tests do not need PostgreSQL,
whose sharing tests/search/test_engine.py::test_two_workers_share_one_storage covers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from composer.cli import main
from search.config import SearchConfig
from search.engine import visible_gpu, worker_placement
from search.fidelity import LADDERS, rung_budget
from search.known import known_layouts
from search.lm import get_lm_budget
from search.plan import Device, _duration, plan_search
from search.resume import is_evaluation

ROOT = Path(__file__).resolve().parents[2]
RECIPES = {name: ROOT / "recipes" / "search" / f"gpu-halving-{name}.yaml" for name in ("1node", "multihost")}
# the plumbing overrides of a CPU run (the recipes' own budget trains for hours on GPUs)
SMOKE = ["--budget", "smoke", "--trials", "3", "--preset", "tiny", "--wandb", "off"]


def expected_runs(ladder, index: int, target: str | None) -> int:
    """Runs per candidate of a rung, from its budget's definition: a rate each (and the further seeds at the chosen
    one), or, continuing the rung below's trunk, a run per seed."""
    spec = get_lm_budget(rung_budget(ladder, index, target))
    return spec.seeds if spec.continues else len(spec.lrs) + spec.seeds - 1


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_plan_prints_every_rung_and_trains_nothing(tmp_path, capsys, recipe):
    out = tmp_path / "out"
    code = main(["search", "--recipe", str(RECIPES[recipe]), "--out", str(out), "--plan", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0
    assert not out.exists(), "--plan must write nothing: no study, no config.json"
    config = SearchConfig.from_recipe(RECIPES[recipe])
    ladder = LADDERS[config.budget]
    known = len(known_layouts(config.layers, list(config.primitives))[0])
    rungs = [stage for stage in plan["stages"] if stage["name"].startswith("rung")]
    assert len(rungs) == len(ladder.rungs) == len(plan["stages"])  # no probe, no confirmation in these recipes
    for index, (stage, rung) in enumerate(zip(rungs, ladder.rungs, strict=True)):
        spec = get_lm_budget(rung_budget(ladder, index, config.target))
        assert stage["budget"] == spec.name and stage["seq_len"] == spec.seq_len
        assert stage["runs"][0] == expected_runs(ladder, index, config.target)
        assert stage["tokens"] == spec.tokens // (spec.seq_len * spec.batch_size) * spec.seq_len * spec.batch_size
        most = config.trials if index == 0 else rung.keep * (1 + (rung.promote_by == "forecast")) + known
        assert stage["candidates"][1] == min(most, rungs[index - 1]["candidates"][1] if index else most)
        assert stage["total_runs"][1] == stage["candidates"][1] * stage["runs"][1]
    assert plan["storage"] == (config.storage or f"sqlite:///{out.resolve() / 'study.db'}")
    assert plan["studies"][1:] == [f"{plan['studies'][0]}-rung{k}" for k in range(1, len(ladder.rungs))]
    assert [w["worker"] for w in plan["workers"]] == list(range(config.workers))
    assert plan["wall_seconds"] > 0 and plan["basis"]


def test_plan_text_names_the_device_the_workers_and_the_resume(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["search", "--recipe", str(RECIPES["1node"]), *SMOKE, "--workers", "2", "--out", str(out),
                 "--plan"]) == 0
    text = capsys.readouterr().out
    assert "nothing trains with --plan" in text and "rung 0" in text and "rung 1" in text
    assert ("workers: 2 on the CPU" in text) or ("->GPU" in text)
    assert "re-running the same command resumes" in text and "estimate:" in text and "total: about" in text
    assert not out.exists()


def test_a_cpu_plan_with_s_or_d_says_its_speed_was_measured_on_a_m_patterns(tmp_path):
    """The CPU figure is the default A/M search's FLOP rate; S and D train several times slower per FLOP there, so
    a plan that searches them says its estimate is low (and one over A/M alone does not)."""
    cpu = Device("cpu", 0, "CPU", 2)
    plans = {prims: plan_search(SearchConfig(primitives=prims, out=str(tmp_path / prims)), cpu)
             for prims in ("AM", "AMSD")}
    assert not any("slower per FLOP" in line for line in plans["AM"]["basis"])
    assert any("D, S run many small ops" in line for line in plans["AMSD"]["basis"])


@pytest.mark.parametrize("recipe, gpus", [("1node", 8), ("multihost", 16)])
def test_the_recipes_quote_their_plan(recipe, gpus):
    """The GPU-hours and wall time in a recipe's comment are what --plan computes for its node(s) of H200s: a change
    of the ladder or of the estimate that leaves the comment behind fails here."""
    config = SearchConfig.from_recipe(RECIPES[recipe], workers=gpus, storage=None, study=None, out="runs/x")
    plan = plan_search(config, Device.gpus(gpus))
    text = RECIPES[recipe].read_text()
    assert f"{plan['device_hours']:.1f} GPU-hours" in text
    assert f"about {_duration(plan['wall_seconds'])}" in text
    low, high = plan["device_hours_range"]
    assert f"({low:.1f} to {high:.1f})" in text


def test_workers_take_gpus_round_robin_within_the_visible_ones():
    assert worker_placement(3, 2, 16) == [(0, 5), (1, 5), (0, 5)]
    assert worker_placement(2, 0, 2) == [(None, 1), (None, 1)]
    assert [visible_gpu(gpu, "4,5,6,7") for gpu in (0, 3)] == ["4", "7"]
    assert visible_gpu(1, "") == "1"
    plan = plan_search(SearchConfig(budget="smoke", widths="tiny", workers=3, out="runs/x"), Device.gpus(2, cpus=16))
    assert [(w["gpu"], w["threads"]) for w in plan["workers"]] == [("0", 5), ("1", 5), ("0", 5)]


def _workers_by_study(storage: str) -> dict[str, set]:
    """Each study of ``storage``: the worker processes (pids) whose trials trained a pattern."""
    backend = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage)) \
        if storage.endswith(".log") else storage
    found = {}
    for summary in optuna.get_all_study_summaries(backend):
        study = optuna.load_study(study_name=summary.study_name, storage=backend)
        found[summary.study_name] = {t.user_attrs.get("worker") for t in study.trials if is_evaluation(t)}
    return found


@pytest.mark.slow  # real training in spawned workers: 275 s / 478 s on 2 cores at load 7 (minutes idle)
def test_the_1node_recipe_runs_with_two_workers_in_one_study(tmp_path):
    """The search's own process is this one (its workers are spawned processes all the same): a further process
    would only import torch and Lightning once more."""
    out = tmp_path / "out"
    assert main(["search", "--recipe", str(RECIPES["1node"]), *SMOKE, "--workers", "2", "--out", str(out)]) == 0
    assert json.loads((out / "best.json").read_text())["answer"] is not None
    workers = _workers_by_study(f"sqlite:///{out / 'study.db'}")
    assert len(workers) == 2  # rung 0 and rung 1
    assert any(len(pids) == 2 for pids in workers.values()), f"both workers should train in a study: {workers}"


@pytest.mark.slow  # real training in spawned workers: 275 s / 478 s on 2 cores at load 7 (minutes idle)
def test_the_multihost_recipe_shares_its_study_with_a_second_process(tmp_path, capsys):
    """Two processes as two hosts: the same recipe and storage (a journal file standing in for PostgreSQL), each its
    own --out; together they train each rung's candidates once, in the recipe's named studies."""
    storage = str(tmp_path / "study.log")
    argv = ["search", "--recipe", str(RECIPES["multihost"]), *SMOKE, "--workers", "1", "--storage", storage]
    # host 1 in its own process, host 0 in this one (a third process would only import torch again) once host 1
    # has written its config.json, past its imports: from there the two race for the trials as two hosts would
    other = subprocess.Popen([sys.executable, "-m", "composer", *argv, "--out", str(tmp_path / "host1")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "WANDB_SILENT": "true"})
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "host1" / "config.json").exists() and other.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        here = main([*argv, "--out", str(tmp_path / "host0")])
        said = capsys.readouterr()
        results = [(said.out, said.err), other.communicate(timeout=600)]
    finally:
        other.kill()
    assert (here, other.returncode) == (0, 0), [err[-2000:] for _, err in results]
    workers = _workers_by_study(storage)
    study = SearchConfig.from_recipe(RECIPES["multihost"]).study
    assert set(workers) == {study, f"{study}-rung1"}
    assert len(set().union(*workers.values())) == 2, f"both processes should train: {workers}"
    backend = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage))
    for name in workers:
        trained = [t.user_attrs["pattern"] for t in optuna.load_study(study_name=name, storage=backend).trials
                   if is_evaluation(t)]
        assert len(trained) == len(set(trained)), f"{name}: a pattern trained twice: {trained}"
    answers = {json.loads((tmp_path / f"host{i}" / "best.json").read_text())["study"] for i in range(2)}
    assert answers == {f"{study}-rung1"}
    assert re.search(r"study .gpu-halving", results[0][1] + results[1][1])


def test_the_plan_says_what_an_equal_cost_search_grows_every_model_to():
    from search.plan import plan_search, plan_text

    config = SearchConfig(primitives="AMSD", equal_cost="nemotron-h", deployed_at="llama-3.2-1b", cost_device="h200")
    plan = plan_search(config)
    assert plan["equal_cost"]["deployed"] == "llama-3.2-1b" and plan["equal_cost"]["device"] == "h200"
    text = plan_text(plan)
    assert "grown to equal cost" in text and "modeled on h200" in text and "assumed constants" in text
    assert plan_search(SearchConfig(primitives="AMSD"))["equal_cost"] is None
