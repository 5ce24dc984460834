"""The mixers space (``--space mixers``, search.mixer_space): mixer slots each followed by 0-2 MLPs and a searched
depth, beside the default layers space (issue 68, part 5)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import optuna
import pytest

from composer.cli import main
from composer.errors import ComposerUsageError
from composer.pattern import parse_pattern
from search.config import SearchConfig
from search.engine import check_score_settings
from search.mixer_space import MixerSpace
from search.spaces import build_space
from search.strategies.base import known_first, make_space

TOY = "toy_evaluator:make"
ANSWER_MLP_16 = parse_pattern("S(MD)x3 MAMDMSMDM")  # issue 68's answer-mlp@16: 8 mixers, an MLP after each


@pytest.mark.parametrize("conditional", [False, True])
def test_pattern_of_and_params_of_are_inverse_over_the_whole_small_space(conditional):
    space = MixerSpace(3, "AMS", conditional=conditional)  # 2 or 3 slots of A/S with 0-2 M: 6^2 + 6^3 patterns
    patterns = space.enumerate()
    assert len(patterns) == len(set(patterns)) == space.size == 36 + 216
    for pattern in patterns:
        params = space.params_of(pattern)
        assert space.pattern_of(params) == pattern
        assert space.params_of(space.pattern_of(params)) == params
        assert space.inexpressible(pattern) is None
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(30):  # what suggest proposes is in the space, and params_of reads back its active parameters
        trial = study.ask()
        pattern = space.suggest(trial)
        assert pattern in patterns
        assert _active(space.params_of(pattern)) == _active(trial.params)


def _active(params: dict) -> dict:
    """The depth and the slots it uses (the dormant slots past it are the fixed form's filler)."""
    return {name: value for name, value in params.items()
            if name == "slots" or int(name.rpartition("_")[2]) < params["slots"]}


def test_answer_mlp_16s_kind_of_layout_each_mixer_followed_by_one_mlp_is_in_the_space():
    space = MixerSpace(8, "AMSD")
    params = space.params_of(ANSWER_MLP_16)
    assert params["slots"] == 8 and all(params[f"ffn_{i}"] == 1 for i in range(8))
    assert "".join(params[f"mixer_{i}"] for i in range(8)) == "SDDDADSD"
    assert space.pattern_of(params) == ANSWER_MLP_16
    assert MixerSpace(6, "AMSD").inexpressible(ANSWER_MLP_16) == "8 mixers, outside the space's 3 to 6"
    # the layers space at its own --layers holds no 16-layer stack at all
    assert build_space("layers", 6, "AMSD").inexpressible(ANSWER_MLP_16) == "16 searched layers, not 6"


@pytest.mark.parametrize("pattern, why", [
    ("MAMA", "it starts with M: every slot starts with a mixer"),
    ("AAMMM", "A at slot 1 is followed by more than 2 M"),
    ("AMSMWM", "layer 4 is W, not a mixer among --primitives 'AMSD'"),
    ("AESMDM", "layer 1 is E, an FFN the space does not offer (it offers M)"),
    ("AMSM", "2 mixers, outside the space's 3 to 6"),
])
def test_a_pattern_outside_the_space_says_why(pattern, why):
    space = MixerSpace(6, "AMSD")
    assert space.inexpressible(pattern) == why
    with pytest.raises(ComposerUsageError, match=re.escape(why)):
        space.params_of(pattern)


def test_depth_runs_from_half_of_layers_to_layers_and_the_ffn_is_m_or_e():
    assert (MixerSpace(6, "AM").least, MixerSpace(7, "AM").least, MixerSpace(1, "AM").least) == (3, 4, 1)
    assert MixerSpace(2, "AM").enumerate() == ["A", "AM", "AMM", "AA", "AAM", "AAMM", "AMA", "AMAM", "AMAMM", "AMMA",
                                               "AMMAM", "AMMAMM"]  # attention as the only mixer is a space
    assert MixerSpace(2, "SE").enumerate()[:3] == ["S", "SE", "SEE"]  # E follows the mixers where M is not offered
    assert MixerSpace(2, "SD").size == 2 + 4  # no FFN offered: mixers only


@pytest.mark.parametrize("kwargs, message", [
    ({"primitives": "M"}, "needs a mixer among --primitives"),
    ({"primitives": "AME"}, "offers M and E: drop one"),
    ({"most": 0}, "layers must be a positive integer"),
    ({"min_share": {"W": 0.2}}, "not among the primitives"),
    ({"min_share": {"M": 0.7}}, "no stack of 3 to 6 mixers with 0-2 M after each holds M >= 0.7"),
])
def test_bad_mixer_spaces_are_one_line_errors(kwargs, message):
    with pytest.raises(ComposerUsageError, match=re.escape(message)):
        MixerSpace(**{"most": 6, "primitives": "AMSD", **kwargs})


@pytest.mark.parametrize("shares", [
    {"min_share": {"M": 0.6}}, {"min_share": {"M": 0.67}}, {"max_share": {"M": 0.0}}, {"min_share": {"A": 0.5}},
    {"min_share": {"A": 0.4, "S": 0.4}}, {"max_share": {"A": 0.2, "S": 0.2}}, {"min_share": {"A": 1.0}},
    {"min_share": {"A": 0.3}, "max_share": {"A": 0.3}}, {"min_share": {"M": 0.5}, "max_share": {"A": 0.1}},
])
def test_the_up_front_share_check_agrees_with_every_pattern_of_the_space(shares):
    every_pattern = MixerSpace(3, "AMS").enumerate()
    probe = MixerSpace(3, "AMS")  # the violation rule without the constructor's check
    for name, value in shares.items():
        object.__setattr__(probe, name, value)
    if any(probe.violation(pattern) is None for pattern in every_pattern):
        MixerSpace(3, "AMS", **shares)
    else:
        with pytest.raises(ComposerUsageError, match="no pattern satisfies the constraints"):
            MixerSpace(3, "AMS", **shares)


def test_a_stage_without_known_layouts_is_timed_by_a_stack_at_the_middle_depth():
    """The ETA's stand-in pattern (``--no-known``): the mixers space's middle depth with one MLP a mixer, not a
    6-layer pattern a fifth the length of the stacks the space trains."""
    from search.progress import SearchEta

    config = SearchConfig(space="mixers", primitives="AMSD", layers=8, out="unused")
    assert SearchEta._representative(config) == "AMSMDMAMSMDM" == MixerSpace(8, "AMSD").representative
    assert SearchEta._representative(SearchConfig(primitives="AMSD", out="unused")) == "AMSDAM"


def test_every_trial_holds_every_parameter_so_gp_tpe_and_nsga2_model_the_deep_slots():
    """Optuna's model-based samplers learn only the parameters every trial has (the intersection search space):
    the fixed form keeps the slots past the sampled depth in it, dormant, instead of drawing them at random."""
    space = MixerSpace(4, "AMSD")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(lambda trial: len(space.suggest(trial)), n_trials=12)
    assert len({trial.params["slots"] for trial in study.trials}) > 1
    shared = optuna.search_space.intersection_search_space(study.get_trials())
    assert set(shared) == {"slots", *(f"{kind}_{i}" for kind in ("mixer", "ffn") for i in range(4))}


def test_brute_force_visits_each_pattern_of_the_space_once():
    space = MixerSpace(2, "AM", conditional=True)  # brute force's form: only the active slots are parameters
    study = optuna.create_study(sampler=optuna.samplers.BruteForceSampler(seed=0))
    seen = []
    study.optimize(lambda trial: seen.append(space.suggest(trial)) or 0.0, n_trials=100)
    assert sorted(seen) == sorted(space.enumerate()) and len(seen) == space.size == 12


def test_known_layouts_enter_where_the_space_expresses_them_and_the_rest_say_why():
    config = SearchConfig(space="mixers", primitives="AMSD", out="unused")
    lines = []
    first = dict(known_first(config, make_space(config, config.layers), lines.append))
    assert {attrs["known"]: pattern for pattern, attrs in first.items()} == {
        "llama": "AMAMAM", "nemotron-h": "SMSAMS", "linear-7to1": "DMDMAM", "nemotron-flash": "DMSMAM"}
    assert "composer-paper (AAMMMM is not in the space: A at slot 1 is followed by more than 2 M)" in lines[0]
    assert "samba (needs W, not in --primitives)" in lines[0]
    space = make_space(config, config.layers)
    assert [space.params_of(pattern)["slots"] for pattern in first] == [3, 4, 3, 3]


def test_the_study_name_keeps_todays_default_and_names_the_mixers_space():
    default = SearchConfig(out="unused")
    assert re.fullmatch(r"lm-cpu-successive-halving-6L-AM-gp-score-seed0-wsd(-bf16)?", default.study_name)
    assert SearchConfig(space="layers", out="unused").study_name == default.study_name
    mixers = SearchConfig(space="mixers", out="unused")
    assert "-6mixers-AM-" in mixers.study_name and mixers.study_name != default.study_name
    assert (default.score_settings()["space"], mixers.score_settings()["space"]) == ("layers", "mixers")


def test_a_study_named_by_hand_refuses_the_other_space(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="mine")
    check_score_settings(study, SearchConfig(study="mine", out=str(tmp_path)))
    with pytest.raises(ComposerUsageError, match="space='layers' \\(now 'mixers'\\)"):
        check_score_settings(study, SearchConfig(study="mine", space="mixers", out=str(tmp_path)))


@pytest.mark.parametrize("argv, message", [
    (["--space", "mixers", "--primitives", "M"], "--space mixers needs a mixer among --primitives"),
    (["--space", "mixers", "--strategy", "end-incremental"], "use --strategy successive-halving or one-shot"),
    (["--space", "blocks"], "--space must be one of layers, mixers, got 'blocks'"),
])
def test_bad_combinations_exit_2_with_one_line_before_writing_anything(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["search", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_a_mixers_search_end_to_end_varies_depth_and_starts_from_the_known_layouts(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["search", "--space", "mixers", "--evaluator", TOY, "--budget", "smoke", "--primitives", "AMS",
                 "--layers", "4", "--trials", "10", "--sampler", "tpe", "--wandb", "off", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "patterns of 2-4 mixers of A/S, each followed by 0-2 M" in err
    rows = json.loads((out / "leaderboard.json").read_text())
    space = MixerSpace(4, "AMS")
    assert all(space.inexpressible(row["pattern"]) is None for row in rows), [row["pattern"] for row in rows]
    assert {row.get("known") for row in rows} >= {"llama", "nemotron-h"}
    assert len({len(row["pattern"]) for row in rows}) > 1, "every candidate at one depth: depth is not searched"
    assert main(["report", str(out)]) == 0
    assert "space mixers (up to 4 mixers)" in capsys.readouterr().out.splitlines()[0]


def test_brute_force_over_a_mixers_search_trains_each_pattern_once(tmp_path, monkeypatch):
    log = tmp_path / "trained.log"
    monkeypatch.setenv("TOY_EVAL_LOG", str(log))
    out = tmp_path / "out"
    assert main(["search", "--space", "mixers", "--evaluator", TOY, "--budget", "smoke", "--primitives", "AM",
                 "--layers", "2", "--trials", "12", "--sampler", "brute", "--no-known", "--wandb", "off",
                 "--out", str(out), "--json"]) == 0
    trained = log.read_text().split()
    assert sorted(trained) == sorted(MixerSpace(2, "AM").enumerate())


def test_the_smoke_plan_of_a_mixers_search(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["search", "--space", "mixers", "--budget", "smoke", "--trials", "3", "--preset", "tiny", "--wandb",
                 "off", "--out", str(out), "--plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["space"] == "3-6 mixers of A, each followed by 0-2 M"
    assert all("-6mixers-" in study for study in plan["studies"]) and plan["wall_seconds"] > 0
    assert not out.exists()
