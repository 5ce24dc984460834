"""One name per meaning (issue 61): walk every subcommand's parser against ``composer.cli.vocabulary``'s table.

A flag missing from the table, a name with two meanings or a meaning with two names, a table that names a command
without the flag, an old spelling that is not a notice pointing at its new flag, or docs/usage/vocabulary.md out of
step with the table: each fails here."""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from composer.cli import build_parser
from composer.cli.format import RenamedFlag
from composer.cli.parsing import announce_old_spellings
from composer.cli.vocabulary import ALL, TERMS, table
from composer.training import config as train_config

ROOT = Path(__file__).resolve().parents[3]
BY_FLAG = {term.flag: term for term in TERMS}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def _visible(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The flags ``--help`` (``--help-all`` for search) lists, ``--no-X`` of a ``--X/--no-X`` pair folded into
    ``--X``."""
    shown = {}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, RenamedFlag):
            continue
        for flag in action.option_strings:
            if flag in ("-h", "--help"):
                continue
            if isinstance(action, argparse.BooleanOptionalAction) and flag.startswith("--no-"):
                continue
            shown[flag] = action
    return shown


def _hidden(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    return [(flag, action) for action in parser._actions if action.help == argparse.SUPPRESS
            for flag in action.option_strings]


def test_every_flag_a_help_lists_is_in_the_table_for_that_command():
    parsers = _parsers()
    assert set(parsers) == set(ALL)
    missing = [f"composer {command} {flag}" for command, parser in parsers.items() for flag in _visible(parser)
               if flag not in BY_FLAG or command not in BY_FLAG[flag].commands]
    assert not missing, f"add these to composer.cli.vocabulary.TERMS (or use the name it gives that meaning): {missing}"


def test_the_table_names_no_command_without_its_flag():
    parsers = _parsers()
    untrue = [f"composer {command} {term.flag}" for term in TERMS for command in term.commands
              if term.flag not in _visible(parsers[command])]
    assert not untrue, untrue


def _names_of_one_meaning(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """Flags that set what another offered flag sets, read from the parsers (what a flag does is the attribute it
    stores into, its ``dest``): two offered names on one ``dest`` of a command (``add_argument("--target", "--to")``,
    or two actions on one ``dest``), or a flag that stores into the attribute another offered flag is named for (an
    ``extrapolate --to`` storing into ``target``, the ``--target`` of the other commands). A free-text meaning in
    the table cannot tell two names for one meaning apart: these can."""
    offered = {flag for parser in parsers.values() for flag in _visible(parser)}
    named_for = {flag.lstrip("-").replace("-", "_"): flag for flag in offered}
    found = []
    for command, parser in parsers.items():
        by_dest = defaultdict(list)
        for flag, action in _visible(parser).items():
            by_dest[action.dest].append(flag)
        for dest, flags in by_dest.items():
            owner = named_for.get(dest)
            if len(flags) > 1:
                found.append(f"composer {command}: {', '.join(sorted(flags))} each set {dest!r}")
            elif owner is not None and owner != flags[0]:
                found.append(f"composer {command} {flags[0]} sets {dest!r}, what {owner} sets")
    return found


def test_one_name_one_meaning_and_one_meaning_one_name():
    names = Counter(term.flag for term in TERMS)
    assert [name for name, n in names.items() if n > 1] == []
    assert _names_of_one_meaning(_parsers()) == []
    # what one flag takes in each command: a switch in one and a value in another is two meanings
    # even where the table was not edited (hybridize's --search was a switch and transfer's a directory)
    kinds = defaultdict(set)
    for command, parser in _parsers().items():
        for flag, action in _visible(parser).items():
            kinds[flag].add("a switch" if action.nargs == 0 else "takes a value")
    assert {flag: kind for flag, kind in kinds.items() if len(kind) > 1} == {}


def test_two_names_for_one_meaning_are_found_in_the_parsers():
    """The check above, on a parser given a second name for a meaning: in the same command, in another command, and
    as a second spelling on one action."""

    def with_flags(*added) -> dict[str, argparse.ArgumentParser]:
        parsers = _parsers()
        for command, args, dest in added:
            parsers[command].add_argument(*args, dest=dest)
        return parsers

    assert _names_of_one_meaning(with_flags(("train", ["--pattern"], "arch"))) == [
        "composer train: --arch, --pattern each set 'arch'"]
    assert _names_of_one_meaning(with_flags(("extrapolate", ["--grow-to"], "target"))) == [
        "composer extrapolate: --grow-to, --target each set 'target'"]
    assert _names_of_one_meaning(with_flags(("info", ["--grow-to"], "target"))) == [
        "composer info --grow-to sets 'target', what --target sets"]
    assert _names_of_one_meaning(with_flags(("eval", ["--hardware", "--on"], "on"))) == [
        "composer eval: --hardware, --on each set 'on'"]


# the names issue 61 found for one meaning: the first is the name, the others must not be offered by any --help
SPLIT_MEANINGS = (
    ("--target", "--to"),
    ("--attention-at-target", "--attention"),
    ("--depth-at-target", "--depth"),
    ("--from-search", "--search"),
    ("--device", "--accelerator"),
    ("--precision", "--dtype", "--cache-dtype"),
    ("--init-from", "--from"),
    ("--arch", "--pattern"),
    ("--clusters", "--k"),
)


@pytest.mark.parametrize("names", SPLIT_MEANINGS, ids=lambda names: names[0])
def test_a_meaning_once_split_is_offered_under_one_name(names):
    offered = {flag for parser in _parsers().values() for flag in _visible(parser)}
    assert names[0] in offered
    assert offered.isdisjoint(names[1:]), sorted(offered & set(names[1:]))


def test_temperature_means_sampling_and_distillation_is_its_own_flag():
    parsers = _parsers()
    assert [command for command, p in parsers.items() if "--temperature" in _visible(p)] == ["generate"]
    assert {command for command, p in parsers.items() if "--distill-temperature" in _visible(p)} == {"train",
                                                                                                    "hybridize"}


def test_every_old_spelling_is_a_notice_that_sets_its_new_flag():
    for command, parser in _parsers().items():
        shown = _visible(parser)
        for flag, action in _hidden(parser):
            assert isinstance(action, RenamedFlag), f"composer {command} {flag} is hidden but not an old spelling"
            new = "--" + action.new.replace("_", "-")
            assert new in shown and shown[new].dest == action.dest, (command, flag, new)
            was = BY_FLAG[new].was
            assert flag in was or f"{command} {flag}" in was or any(w.startswith(f"{flag} on") for w in was), (
                f"the table's old spellings of {new} do not name composer {command} {flag}")


def _value(action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    if action.choices:
        return [list(action.choices)[-1]]
    return ["3"] if action.type in (int, float) else ["x"]


@pytest.mark.parametrize("command", ALL)
def test_an_old_spelling_parses_to_what_its_new_flag_does_with_one_notice(command, capsys, monkeypatch):
    parser = _parsers()[command]
    shown = _visible(parser)
    required = [arg for action in parser._actions if action.required
                for arg in ([action.option_strings[0], "x"] if action.option_strings else ["x"])]
    for flag, action in _hidden(parser):
        monkeypatch.setattr(train_config, "_noticed", set())
        value = _value(action)
        new = "--" + action.new.replace("_", "-")
        old_args, _ = parser.parse_known_args([*required, flag, *value])
        announce_old_spellings(old_args)  # as composer does once the command line is accepted
        new_args, _ = parser.parse_known_args([*required, new, *value])
        assert getattr(old_args, action.dest) == getattr(new_args, action.dest), (command, flag)
        assert capsys.readouterr().err.splitlines() == [f"{flag} is now {new}; the old spelling will go"]
        assert shown[new].dest == action.dest


def test_the_guide_holds_the_table():
    guide = (ROOT / "docs/usage/vocabulary.md").read_text()
    start, end = "<!-- vocabulary table: python -m composer.cli.vocabulary -->", "<!-- end of the table -->"
    assert start in guide and end in guide
    held = guide.split(start)[1].split(end)[0].strip()
    assert held == table(), "docs/usage/vocabulary.md: paste in the output of python -m composer.cli.vocabulary"


def _old_spellings() -> dict[str, set[str]]:
    """Every command's old flag spellings, as typed."""
    return {command: {flag for flag, action in _hidden(parser) if isinstance(action, RenamedFlag)}
            for command, parser in _parsers().items()}


def _guides() -> list[Path]:
    """README, the guides (docs/, docs/usage/; not the dated reports, which quote the commands as they were run) and
    the recipes' comments."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs/usage").glob("*.md")),
            *sorted((ROOT / "recipes").rglob("*.yaml")), ROOT / "benchmarks/README.md"]


def _commands_in(line: str) -> list[tuple[str, list[str]]]:
    """Each ``composer CMD ...`` on a line, with the tokens that follow it up to the next ``composer``, ``|``, ``;`` or
    the end of an inline code span."""
    found = []
    for part in line.split("composer ")[1:]:
        tokens = part.split("`")[0].split("|")[0].split(";")[0].replace("=", " ").replace(",", " ").split()
        if tokens and tokens[0] in ALL:
            found.append((tokens[0], tokens[1:]))
    return found


def test_the_guides_teach_the_current_names():
    old = _old_spellings()
    stale = []
    for path in _guides():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for command, tokens in _commands_in(line):
                used = sorted(old[command] & set(tokens))
                if command == "train" and "--from-search" in tokens and "--preset" in tokens:
                    used.append("--preset with --from-search (now --target)")
                if used:
                    stale.append(f"{path.relative_to(ROOT)}:{number}: composer {command} {', '.join(used)}")
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("recipe", sorted(str(path.relative_to(ROOT)) for kind in ("train", "search", "pipeline")
                                          for path in (ROOT / "recipes" / kind).glob("*.yaml"))
                         + ["recipes/hybridize-llama-3.2-1b.yaml"])
def test_the_recipes_use_the_current_keys(recipe, capsys, monkeypatch):
    """A recipe read prints no "X is now Y" notice: the shipped recipes teach the current names, as the guides do."""
    from composer.cli.hybridize import apply_recipe
    from composer.experiments.pipeline import PipelineConfig
    from composer.training.config import TrainConfig
    from search.config import SearchConfig

    monkeypatch.setattr(train_config, "_noticed", set())
    path = ROOT / recipe
    kind = path.parent.name
    if kind == "train":
        TrainConfig.recipe_values(path)
    elif kind == "search":
        SearchConfig.from_recipe(path)
    elif kind == "pipeline":
        PipelineConfig.from_recipe(path)
    else:
        apply_recipe(build_parser().parse_args(["hybridize", "--recipe", str(path)]))
    assert "is now" not in capsys.readouterr().err
