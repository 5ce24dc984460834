"""Flag names. Issue 69: a flag is taken only as spelt out in full, on every command (argparse took any unambiguous
prefix, so ``--wid`` reached the hidden old spelling ``--widths``), and one option given two values on a command
line is refused, whichever spellings gave them and whether it takes a value or is a switch. Issue 49, "one name, one
meaning": ``search --help`` fits a screen with the advanced flags grouped under ``--help-all``; ``train``'s FSDP/DDP
flag is ``--parallelism`` (``--strategy`` is the search's algorithm), the old spelling still accepted with a
one-line notice; every ``train`` flag says its default."""

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


def _commands() -> dict[str, argparse.ArgumentParser]:
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subcommands.choices)


def _subparser(name: str) -> argparse.ArgumentParser:
    return _commands()[name]


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


def _parsed(*argv: str) -> argparse.Namespace:
    """``argv`` parsed as ``composer`` takes it: the options checked against each other, old spellings' notices."""
    from composer.cli.parsing import announce_old_spellings, refuse_conflicts

    args = build_parser().parse_args(list(argv))
    refuse_conflicts(args)
    announce_old_spellings(args)
    return args


def _refused(capsys, *argv: str) -> str:
    """The one line ``composer ARGV`` is refused with (exit 2, no traceback, no notice before it)."""
    from composer.cli import main

    try:
        status = main(list(argv))
    except SystemExit as stopped:
        status = stopped.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith(f"composer {argv[0]}: error: "), err
    return err


def _abbreviations(parsers: dict[str, argparse.ArgumentParser]) -> list[tuple[str, str, str]]:
    """(command, flag, the flag less its last letter) for every long flag of every command, the hidden old spellings
    included, where the shorter word is not itself a flag of that command."""
    found = []
    for command, parser in sorted(parsers.items()):
        flags = {flag for action in parser._actions for flag in action.option_strings}
        found += [(command, flag, flag[:-1]) for flag in sorted(flags)
                  if flag.startswith("--") and len(flag) > 3 and flag[:-1] not in flags]
    return found


def _required(parser: argparse.ArgumentParser) -> list[str]:
    return [word for action in parser._actions if action.required
            for word in ([action.option_strings[0], "x"] if action.option_strings else ["x"])]


def test_no_command_takes_an_abbreviated_flag():
    """Each command's parser leaves a flag less its last letter unparsed (main then refuses it in one line), the
    hidden old spellings' prefixes too; with argparse's default it was taken as the flag."""
    parsers = _commands()
    cases = _abbreviations(parsers)
    assert len(cases) > 200 and {command for command, _, _ in cases} == set(parsers)
    taken = []
    for command, flag, short in cases:
        parser = parsers[command]
        value = [] if parser._option_string_actions[flag].nargs == 0 else ["1"]
        try:
            _, unknown = parser.parse_known_args([*_required(parser), short, *value])
        except SystemExit:  # an ambiguous prefix: argparse's own refusal, naming flags the user never typed
            unknown = []
        if short not in unknown:
            taken.append(f"composer {command} {short} (for {flag})")
    assert not taken, taken
    assert build_parser().allow_abbrev is False


@pytest.mark.parametrize("argv, unknown, meant", [
    (["search", "--preset", "tiny", "--wid", "demo-4m", "--plan"], "--wid demo-4m", "--preset"),  # the issue's
    (["search", "--prese", "tiny", "--widths", "demo-4m", "--plan"], "--prese tiny", "--preset"),
    (["info", "AM", "--dep", "8"], "--dep 8", "--depth-at-target or --deployed-at"),  # not the hidden --depth
    (["train", "--strat", "ddp", "--out", "o"], "--strat ddp", "--parallelism"),  # the old spelling's new name
    (["extrapolate", "AAMMMM", "--targ", "llama-350m", "--to", "tiny"], "--targ llama-350m", "--target"),
    (["hybridize", "--search-place", "--init-from", "m", "--arch", "AM", "--keep", "1"], "--search-place",
     "--search-placement"),
])
def test_an_abbreviated_flag_is_refused_naming_the_flags_it_begins(argv, unknown, meant, capsys, tmp_path,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, *argv)
    assert f"unrecognized arguments: {unknown}" in err and f"did you mean {meant}?" in err, err
    assert "is now" not in err and not list(tmp_path.iterdir())


def test_search_resume_says_that_the_same_command_resumes(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, "search", "--budget", "smoke", "--resume")
    assert "unrecognized arguments: --resume; run the same command without --resume: a search resumes" in err, err


def test_a_renamed_switch_takes_no_value(capsys, tmp_path, monkeypatch):
    """hybridize's --search (now --search-placement) is a switch: the word after it is the next flag, not its
    value. The argv scan read ``--search --init-from`` and ``--search-placement --arch`` as two values of one option
    and refused the line naming --init-from as a value; the command's own check is what refuses it now."""
    from composer.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["hybridize", "--search", "--init-from", "missing", "--search-placement", "--arch", "SMSM", "--keep",
                 "1", "--out", "o", "--wandb", "off"]) == 2
    notice, err = capsys.readouterr().err.splitlines()  # the line was accepted: the notice, then the command's own
    assert notice == "--search is now --search-placement; the old spelling will go"
    assert "'missing' is not a Composer model directory" in err and "old spelling" not in err, err
    assert not list(tmp_path.iterdir())
    args = _parsed("hybridize", "--search", "--init-from", "m", "--search-placement", "--arch", "AMAM")
    assert (args.search_placement, args.init_from, args.arch) == (True, "m", "AMAM")


@pytest.mark.parametrize("argv, shown", [
    (["search", "--preset", "tiny", "--preset", "demo-4m", "--plan"], "--preset tiny and --preset demo-4m"),
    (["search", "--trials", "3", "--trials=5", "--plan"], "--trials 3 and --trials 5"),
    (["train", "--compile", "--no-compile", "--out", "o"], "--compile and --no-compile"),
    (["info", "AM", "--cost-device", "cpu", "--device", "h100"], "--cost-device cpu and --device h100"),
    (["hybridize", "--init-from", "a", "--from", "b", "--arch", "AM"], "--init-from a and --from b"),
])
def test_one_option_given_two_values_is_refused_naming_both(argv, shown, capsys, tmp_path, monkeypatch):
    """argparse keeps the last value: --preset tiny --preset demo-4m trained at demo-4m without a word."""
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, *argv)
    assert shown in err and "give " in err, err
    assert not list(tmp_path.iterdir()), "nothing was started"


def test_one_option_given_one_value_twice_and_a_gathering_flag_repeated_are_taken():
    assert _parsed("search", "--preset", "tiny", "--preset", "tiny").widths == "tiny"
    assert _parsed("search", "--no-prune", "--no-prune").prune is False
    assert _parsed("eval", "--model", "m", "--tasks", "recall", "--include-path", "a", "--include-path",
                   "b").include_path == ["a", "b"]


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
    new = config_from_args(_parsed("train", "--parallelism", "ddp", "--out", str(tmp_path)))
    assert new.parallelism == "ddp" and NOTICE not in capsys.readouterr().err
    old = config_from_args(_parsed("train", "--strategy", "fsdp", "--out", str(tmp_path)))
    assert old.parallelism == "fsdp"
    assert capsys.readouterr().err.strip().splitlines() == [NOTICE]
    assert "--strategy {" not in _help("train", "--help")  # the old spelling works but is not advertised
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        build_parser().parse_args(["train", "--strategy", "deepspeed"])  # still checked against the choices


def test_hybridize_strategy_is_now_parallelism(tmp_path, capsys):
    from composer.cli.hybridize import apply_recipe

    assert _parsed("hybridize", "--init-from", "m", "--strategy", "ddp").parallelism == "ddp"
    assert capsys.readouterr().err.strip() == NOTICE
    assert build_parser().parse_args(["hybridize", "--init-from", "m"]).parallelism == "auto"
    recipe = tmp_path / "old.yaml"
    recipe.write_text("init_from: m\narch: AM\nout: o\nstrategy: ddp\n")
    for flags, expected in (([], "ddp"), (["--parallelism", "fsdp"], "fsdp")):  # a flag wins over the recipe
        args = build_parser().parse_args(["hybridize", "--recipe", str(recipe), *flags])
        apply_recipe(args)
        assert args.parallelism == expected
    assert capsys.readouterr().err.strip() == "strategy is now parallelism; the old spelling will go"


def test_a_hybridize_flag_given_at_its_default_value_wins_over_the_recipe(tmp_path):
    """apply_recipe read a flag still at its default as not given, so --tokens 1000000 (the default) lost to the
    recipe's tokens: the parser's record says what the command line gave."""
    from composer.cli.hybridize import apply_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text("init_from: m\narch: AM\nout: o\ntokens: 5000\nseed: 3\n")
    args = _parsed("hybridize", "--recipe", str(recipe), "--tokens", "1000000")
    apply_recipe(args)
    assert (args.tokens, args.seed) == (1_000_000, 3)


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


# search's --widths is now --preset, as on every other command (the field, and so study names, keep `widths`)

WIDTHS_NOTICE = "--widths is now --preset; the old spelling will go"


def test_search_preset_sets_the_widths_and_the_old_widths_still_works(capsys):
    assert build_parser().parse_args(["search", "--preset", "tiny"]).widths == "tiny"
    assert capsys.readouterr().err == ""
    assert _parsed("search", "--widths", "tiny").widths == "tiny"
    assert capsys.readouterr().err.strip().splitlines() == [WIDTHS_NOTICE]
    assert "--preset PRESET" in _help("search", "--help") and "--widths" not in _help("search", "--help").split(
        "options:")[0]  # the usage line names the new spelling only


def test_a_search_recipe_says_preset_and_widths_still_works_with_the_same_study(tmp_path, capsys):
    from search.config import SearchConfig

    new, old, both = tmp_path / "new.yaml", tmp_path / "old.yaml", tmp_path / "both.yaml"
    new.write_text("preset: tiny\nbudget: smoke\n")
    old.write_text("widths: tiny\nbudget: smoke\n")
    both.write_text("widths: tiny\npreset: search-1m\n")
    from_new = SearchConfig.from_recipe(new)
    assert from_new.widths == "tiny" and capsys.readouterr().err == ""
    from_old = SearchConfig.from_recipe(old)
    assert capsys.readouterr().err.strip() == "widths is now preset; the old spelling will go"
    # the study an existing --out holds is found again: names and stored settings are keyed by the field `widths`
    assert from_new.study_name == from_old.study_name == SearchConfig(widths="tiny", budget="smoke").study_name
    # as before; a CPU with native bf16 (avx512_bf16) trains in it by default, and its studies carry the suffix
    bf16 = "-bf16" if from_new.resolved_precision == "bf16" else ""
    assert from_new.study_name == f"lm-smoke-successive-halving-6L-AM-gp-score-seed0-wsd{bf16}-9d4e6142"
    assert "preset" not in from_new.to_dict() and SearchConfig(preset="tiny").widths == "tiny"
    assert SearchConfig.from_recipe(new, widths="search-1m").widths == "search-1m"  # a flag wins over the recipe
    # one check, one wording: the recipe names its file; the same two names agreeing are not a conflict
    with pytest.raises(Exception, match=r"recipe '.*both.yaml': widths is the old name of preset: give one, not "
                                        r"preset 'search-1m' and widths 'tiny'"):
        SearchConfig.from_recipe(both)
    with pytest.raises(Exception, match=r"^widths is the old name of preset: give one, not preset 'search-1m' and "
                                        r"widths 'tiny'"):
        SearchConfig(preset="search-1m", widths="tiny")
    assert SearchConfig(preset="tiny", widths="tiny").widths == "tiny"


def test_the_search_recipes_say_preset():
    from pathlib import Path

    import yaml

    recipes = [yaml.safe_load(p.read_text()) for p in sorted((Path(__file__).resolve().parents[3] / "recipes" /
                                                               "search").glob("*.yaml"))]
    assert recipes and not [r for r in recipes if "widths" in r]


def test_search_prints_the_presets_it_chose_itself():
    from search.config import SearchConfig

    halving = SearchConfig(budget="smoke")
    assert search_cli.default_notes(halving, set()) == [
        "preset search-1m: the widths candidates train at (the default; --preset sets them)",
        "target tiny: the size the answer is grown to, trained at last and costed at (the smoke ladder's last "
        "rung's; --target sets them)"]
    one_shot = SearchConfig(strategy="one-shot", widths="tiny")
    assert search_cli.default_notes(one_shot, {"widths"}) == [
        "target llama-3.2-1b: the size the answer is grown to and costed at (the default; --target sets them)"]
    assert search_cli.default_notes(one_shot, {"widths", "target"}) == []


# one spelling of a precision and of a dtype everywhere (composer.precision), bad values one line and exit 2

def _one_line_exit_2(capsys, *argv: str) -> str:
    from composer.cli import main

    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("spelling, lightning", [("fp32", "32-true"), ("bf16", "bf16-mixed"),
                                                 ("bf16-true", "bf16-true"), ("32-true", "32-true"),
                                                 ("bf16-mixed", "bf16-mixed"), ("16-mixed", "16-mixed")])
def test_train_takes_every_spelling_of_a_precision(tmp_path, spelling, lightning):
    args = build_parser().parse_args(["train", "--precision", spelling, "--out", str(tmp_path)])
    assert config_from_args(args).precision == lightning


def test_a_bad_precision_is_one_line_and_exit_2_on_train_search_and_hybridize(tmp_path, capsys):
    train = _one_line_exit_2(capsys, "train", "--precision", "fp64", "--out", str(tmp_path / "t"))
    assert "fp32, bf16 (bf16 autocast, fp32 weights), bf16-true (bf16 weights)" in train and "16-mixed" in train
    search = _one_line_exit_2(capsys, "search", "--precision", "bf16-true", "--out", str(tmp_path / "s"))
    assert "fp32, bf16" in search and "got 'bf16-true'" in search  # candidates keep fp32 weights
    hybridize = _one_line_exit_2(capsys, "hybridize", "--init-from", "m", "--arch", "AM", "--out", str(tmp_path / "h"),
                                 "--precision", "half")
    assert "composer hybridize: error: --precision must be auto" in hybridize
    assert not any((tmp_path / name).exists() for name in "tsh")


def test_search_takes_composer_trains_precision_names_for_the_same_study():
    from search.config import SearchConfig

    for lightning, short in (("32-true", "fp32"), ("bf16-mixed", "bf16")):
        args = build_parser().parse_args(["search", "--precision", lightning])
        config = SearchConfig(precision=args.precision)
        assert config.precision == short and config.study_name == SearchConfig(precision=short).study_name


def test_a_bad_precision_is_one_line_and_exit_2_on_bench_inference_and_import(tmp_path, capsys):
    for argv in (["bench-inference", "AM", "--preset", "tiny", "--out", str(tmp_path / "b")],
                 ["import", str(tmp_path / "hf"), "--out", str(tmp_path / "i")]):
        err = _one_line_exit_2(capsys, *argv, "--precision", "float64")
        assert "--precision must be fp32, bf16, fp16 (or float32, bfloat16, float16); got 'float64'" in err
    assert not (tmp_path / "b").exists() and not (tmp_path / "i").exists()


# a command that builds a model at a preset it chose says which

@pytest.mark.parametrize("argv, note", [
    (["info", "AM"], "preset llama-3.2-1b: the widths of AM (the default; --preset sets them)"),
    (["info", "jamba"], "preset llama-3.2-1b: the widths of jamba (the default; --preset sets them)"),
    (["families"], "preset llama-3.2-1b: the widths the families are sized at (the default; --preset sets them)"),
])
def test_info_and_families_print_the_preset_they_chose(capsys, argv, note):
    from composer.cli import main

    assert main([*argv, "--json"]) == 0
    assert capsys.readouterr().err.strip() == note
    assert main([*argv, "--json", "--preset", "tiny"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, old, new", [
    (["search", "--preset", "tiny", "--widths", "demo-4m", "--plan"], "--widths demo-4m", "--preset tiny"),
    (["search", "--widths", "demo-4m", "--preset", "tiny", "--plan"], "--widths demo-4m", "--preset tiny"),
    (["extrapolate", "AAMMMM", "--target", "llama-350m", "--to", "tiny"], "--to tiny", "--target llama-350m"),
    (["extrapolate", "AAMMMM", "--to=tiny", "--target=llama-350m"], "--to tiny", "--target llama-350m"),
    (["train", "--parallelism", "ddp", "--strategy", "fsdp", "--out", "unused"], "--strategy fsdp",
     "--parallelism ddp"),
    (["info", "AM", "--depth-at-target", "8", "--depth", "16"], "--depth 16", "--depth-at-target 8"),
])
def test_an_old_and_a_new_spelling_with_different_values_exit_2_naming_both(argv, old, new, capsys, tmp_path,
                                                                           monkeypatch):
    """argparse keeps whichever spelling came last: --preset tiny --widths demo-4m trained at demo-4m (issue 60).
    One line: the old spelling's notice is not printed for a command line that is refused."""
    monkeypatch.chdir(tmp_path)
    error = _refused(capsys, *argv)
    assert old in error and new in error and "is the old spelling of" in error and "give " in error, error
    assert not list(tmp_path.iterdir()), "nothing was started"


def test_an_old_and_a_new_spelling_with_one_value_are_one_option(capsys):
    from composer.cli import main

    assert main(["extrapolate", "AAMMMM", "--to", "llama-350m", "--target", "llama-350m", "--json"]) == 0
