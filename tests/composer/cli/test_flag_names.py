"""Issue 49, "one name, one meaning": ``search --help`` fits a screen with the advanced flags grouped under
``--help-all``; ``train``'s FSDP/DDP flag is ``--parallelism`` (``--strategy`` is the search's algorithm), the old
spelling still accepted with a one-line notice; every ``train`` flag says its default."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io

import pytest

from composer.cli import build_parser
from composer.cli import search as search_cli
from composer.cli.train import config_from_args
from composer.training import config as train_config
from composer.training.config import TrainConfig

NOTICE = "--strategy is now --parallelism; the old spelling will go"


def _subparser(name: str) -> argparse.ArgumentParser:
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subcommands.choices[name]


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit:
        build_parser().parse_args(list(argv))
    assert exit.value.code == 0
    return out.getvalue()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps to the terminal's width
    monkeypatch.setattr(train_config, "_noticed", set())  # the notice is printed once per process


def test_search_help_fits_a_screen_and_help_all_shows_every_flag():
    short, full = _help("search", "--help"), _help("search", "--help-all")
    assert len(short.splitlines()) < 60, short
    assert "--help-all" in short and "--max-kv" not in short and "--strategy" in short
    flags = [flag for action in _subparser("search")._actions for flag in action.option_strings]
    assert len(flags) > 30
    missing = [flag for flag in flags if flag not in full]
    assert not missing, missing
    for title in search_cli.GROUPS:
        assert f"\n{title}:\n" in full
    assert "help-all" not in full.split("options:")[1].split("--help-all")[1]  # no pointer to itself


def test_the_advanced_search_flags_still_parse():
    args = build_parser().parse_args(["search", "--max-kv", "64MiB@32K", "--storage", "x.log", "--sampler", "tpe",
                                      "--no-prune", "--compile", "--text-field", "body", "--strategy", "one-shot"])
    assert (args.max_kv, args.storage, args.sampler, args.prune, args.compile, args.text_field, args.strategy) == (
        "64MiB@32K", "x.log", "tpe", False, True, "body", "one-shot")


def test_train_strategy_is_now_parallelism_and_the_old_spelling_still_works(tmp_path, capsys):
    new = config_from_args(build_parser().parse_args(["train", "--parallelism", "ddp", "--out", str(tmp_path)]))
    assert new.parallelism == "ddp" and NOTICE not in capsys.readouterr().err
    old = config_from_args(build_parser().parse_args(["train", "--strategy", "fsdp", "--out", str(tmp_path)]))
    assert old.parallelism == "fsdp"
    assert capsys.readouterr().err.strip().splitlines() == [NOTICE]
    assert "--strategy {" not in _help("train", "--help")  # the old spelling works but is not advertised
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        build_parser().parse_args(["train", "--strategy", "deepspeed"])  # still checked against the choices


def test_hybridize_strategy_is_now_parallelism(tmp_path, capsys):
    from composer.cli.hybridize import apply_recipe

    assert build_parser().parse_args(["hybridize", "--from", "m", "--strategy", "ddp"]).parallelism == "ddp"
    assert capsys.readouterr().err.strip() == NOTICE
    assert build_parser().parse_args(["hybridize", "--from", "m"]).parallelism == "auto"
    recipe = tmp_path / "old.yaml"
    recipe.write_text("from: m\npattern: AM\nout: o\nstrategy: ddp\n")
    for flags, expected in (([], "ddp"), (["--parallelism", "fsdp"], "fsdp")):  # a flag wins over the recipe
        args = build_parser().parse_args(["hybridize", "--recipe", str(recipe), *flags])
        apply_recipe(args)
        assert args.parallelism == expected
    assert capsys.readouterr().err.strip() == "strategy is now parallelism; the old spelling will go"


def test_a_recipe_or_caller_using_strategy_still_sets_parallelism(tmp_path, capsys):
    recipe = tmp_path / "old.yaml"
    recipe.write_text("strategy: ddp\ndevices: 2\n")
    assert TrainConfig.from_recipe(recipe).parallelism == "ddp"
    assert capsys.readouterr().err.strip() == "strategy is now parallelism; the old spelling will go"
    assert TrainConfig.from_recipe(recipe, parallelism="fsdp").parallelism == "fsdp"  # the flag wins
    assert TrainConfig(strategy="single").parallelism == "single"  # keyword callers
    assert "strategy" not in TrainConfig().to_dict() and "parallelism" in TrainConfig().to_dict()
    with pytest.raises(Exception, match="old spelling of parallelism"):
        TrainConfig(strategy="ddp", parallelism="fsdp")


def test_the_recipes_use_parallelism():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3] / "recipes"
    train = [yaml.safe_load(p.read_text()) for p in sorted((root / "train").glob("*.yaml"))]
    pipeline = [yaml.safe_load(p.read_text()).get("train") or {} for p in sorted((root / "pipeline").glob("*.yaml"))]
    assert train and not [r for r in train + pipeline if "strategy" in r]
    assert any(r.get("parallelism") == "fsdp" for r in train)


def test_every_train_flag_says_its_default():
    actions = {flag: a for a in _subparser("train")._actions for flag in a.option_strings}
    for field in dataclasses.fields(TrainConfig):
        text = actions["--" + field.name.replace("_", "-")].help or ""
        assert "default" in text or "required" in text, (field.name, text)
    text = _help("train", "--help")
    assert "(default: None)" not in text and "(default: 1000000)" in text and "(default: cosine)" in text
