"""The figures the guides state about the code, read back from the code: the ladders' rungs and budgets, the
search's defaults, the settings a study's name covers, and the tokens a training run rounds its ``--tokens`` to.

A guide (README.md, docs/search.md, docs/usage/*.md) says how to use a thing; where it gives a figure the code
defines (a rung's tokens, a default, a choice offered), a change to either side without the other would leave a
user reading something false. Each test parses the guide's own table or sentence and compares it with the
definition it describes (``search.fidelity.LADDERS``, ``search.lm.LM_BUDGETS``, ``search.config``,
``composer.training.config.TrainConfig``). No training: a few milliseconds of parsing.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.docs_figures.reading import plain, section

ROOT = Path(__file__).resolve().parents[1]


def page(name: str) -> str:
    return (ROOT / name).read_text()


def count(text: str) -> int:
    """A token count as the guides print it: ``8,192``, ``100K``, ``5M``, ``1,048,576``."""
    text = text.replace(",", "").strip()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return round(float(text.rstrip("KM")) * scale)


def rates(text: str) -> tuple[float, ...]:
    """The learning rates a cell lists (``lr 1e-3 / 3e-3``, ``3e-4, 1e-3, 2e-3``), as ``LMBudget.lrs`` sorts them."""
    return tuple(sorted(float(r) for r in re.findall(r"\d+e-\d+", text)))


def table(text: str, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header line starts with ``header``, split at unescaped pipes (a
    cell may hold ``smoke\\|cpu\\|gpu``, kept as ``smoke|cpu|gpu``)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"table with header {header!r} not found"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
        rows.append([cell.replace("\\|", "|").strip() for cell in cells])
    assert rows, f"table {header!r} has no rows"
    return rows


def choices(text: str) -> list[str]:
    """The code spans of a list of choices, each one's parenthesis (its note) left out."""
    return re.findall(r"`(?:--[\w-]+ )?([\w-]+)`", re.sub(r" \([^)]*\)", "", text))


def one(pattern: str, text: str) -> str:
    found = re.findall(pattern, text)
    assert len(found) == 1, f"expected one match of {pattern!r} in {text!r}, found {found}"
    return found[0]


# ----------------------------------------------------------------------------------------------- the ladders


LADDER_TABLES = [("docs/search.md", "The ladders", "| ladder |"),
                 ("docs/usage/search-reference.md", "Search: `composer search`", "| ladder |")]


@pytest.mark.parametrize("name, heading, header", LADDER_TABLES, ids=[t[0] for t in LADDER_TABLES])
def test_the_ladders_table_is_the_ladders(name, heading, header):
    """The guides' tables of the ladders: every ladder, and for each rung its tokens, sequence length (where the
    table gives it), rates, promotions, preset and seeds, as ``search.fidelity.LADDERS`` and
    ``search.lm.LM_BUDGETS`` define them."""
    from search.config import SearchConfig
    from search.fidelity import LADDERS
    from search.lm import LM_BUDGETS

    rows = {one(r"`(\w+)`", row[0]): row for row in table(section(page(name), heading), header)}
    assert set(rows) == set(LADDERS), f"{name}'s ladders {sorted(rows)}, the code's {sorted(LADDERS)}"
    default = SearchConfig.__dataclass_fields__["budget"].default
    marked = [ladder for ladder, row in rows.items() if "(default)" in row[0]]
    assert marked == ([default] if name == "docs/search.md" else []), f"{name}: the default ladder is {default}"
    for ladder_name, ladder in LADDERS.items():
        row, rungs = rows[ladder_name], ladder.rungs
        what = f"{name}, the {ladder_name} ladder"
        first = LM_BUDGETS[rungs[0].budget]
        assert count(one(r"([\d,.]+[KM]?) tokens", row[1])) == first.tokens, f"{what}: rung 0's tokens"
        if "seq" in row[1] or name == "docs/search.md":
            assert count(one(r"seq ([\d,]+)", row[1])) == first.seq_len, f"{what}: rung 0's sequence length"
        assert rates(row[1]) == first.lrs, f"{what}: rung 0's rates"
        assert (f"`{SearchConfig.__dataclass_fields__['widths'].default}`" in row[1]) == (ladder_name == "cpu"), \
            f"{what}: rung 0's preset"
        second = LM_BUDGETS[rungs[1].budget]
        assert int(one(r"best (\d+)", row[2])) == rungs[1].keep, f"{what}: rung 1's promotions"
        assert f"`{second.extrapolate_to}`" in row[2], f"{what}: rung 1's preset is {second.extrapolate_to}"
        assert count(one(r"([\d,.]+[KM]?) tokens", row[2])) == second.tokens, f"{what}: rung 1's tokens"
        assert rates(row[2]) == second.lrs, f"{what}: rung 1's rates"
        if second.seq_len != first.seq_len:
            assert count(one(r"seq ([\d,]+)", row[2])) == second.seq_len, f"{what}: rung 1's sequence length"
        if len(rungs) == 2:  # the last rung is rung 1
            assert plain(row[3]) == "(rung 1)", f"{what}: rung 1 is the last"
            continue
        assert len(rungs) == 3, f"{what}: the table has room for three rungs"
        last = LM_BUDGETS[rungs[2].budget]
        assert int(one(r"best (\d+)", row[3])) == rungs[2].keep, f"{what}: the last rung's promotions"
        assert ("by forecast" in row[3]) == (rungs[2].promote_by == "forecast"), f"{what}: how the last rung promotes"
        assert count(one(r"to ([\d,.]+[KM]?) tokens", row[3])) == last.tokens, f"{what}: the last rung's tokens"
        assert last.continues == ("continued" in row[3]), f"{what}: the last rung continues rung 1's trunk"
        seeds = re.findall(r"(\d+) seeds", row[3])
        assert [int(s) for s in seeds] == ([last.seeds] if last.seeds > 1 else []), f"{what}: the last rung's seeds"


def test_the_rates_table_is_the_budgets():
    """docs/search.md's table of each budget's rates and held-out tokens is ``search.lm.LM_BUDGETS``."""
    from search.fidelity import LADDERS
    from search.lm import LM_BUDGETS

    rows = table(section(page("docs/search.md"), "A learning rate per candidate"), "| budget | rates |")
    seen = set()
    for budget, lrs, held_out in rows:
        names = re.findall(r"`(rung-[\w-]+)`", budget)
        if not names:  # the one-shot budgets: `smoke` / `cpu` / `gpu`, their rates in the same order
            names = [n for n in re.findall(r"`([\w-]+)`", budget) if n in LM_BUDGETS]
            assert names and len(lrs.split(" / ")) == len(names), budget
            groups = lrs.split(" / ")
        else:
            groups = [lrs] * len(names)
        for name, group in zip(names, groups, strict=True):
            assert rates(group) == LM_BUDGETS[name].lrs, f"docs/search.md: {name}'s rates"
            assert count(held_out) == LM_BUDGETS[name].val_tokens, f"docs/search.md: {name}'s held-out tokens"
            seen.add(name)
    rungs = {rung.budget for ladder in LADDERS.values() for rung in ladder.rungs}
    assert rungs | set(LADDERS) <= seen, f"docs/search.md's rates table leaves out {sorted(rungs | set(LADDERS) - seen)}"


def test_readme_states_the_ladders():
    """README's account of the default search and of the GPU ladder, and the sequence lengths it gives, are the
    ladders' (the trials, the promotions, the tokens, the rates, the seeds)."""
    from search.config import SearchConfig
    from search.fidelity import LADDERS
    from search.known import known_layouts
    from search.lm import LM_BUDGETS

    readme = re.sub(r"\s+", " ", page("README.md"))
    config = SearchConfig()
    known, _ = known_layouts(config.layers, list(config.primitives))
    cpu = [LM_BUDGETS[rung.budget] for rung in LADDERS["cpu"].rungs]
    default = one(r"Llama's `AMAMAM` and the paper's `AAMMMM` train first, then (\d+ proposals, [^.]+)\.", readme)
    assert int(one(r"^(\d+) proposals", default)) == config.trials - len(known), "README: the default's proposals"
    assert count(one(r"for ([\d.]+[KM]) tokens at two", default)) == cpu[0].tokens and len(cpu[0].lrs) == 2
    keeps = [int(k) for k in re.findall(r"the best (\d+)", default)]
    assert keeps == [rung.keep for rung in LADDERS["cpu"].rungs[1:]], "README: the default's promotions"
    assert f"`{cpu[1].extrapolate_to}` for {cpu[1].tokens // 1000}K tokens" in default
    assert f"continue to {cpu[2].tokens // 1000}K tokens" in default
    gpu = [LM_BUDGETS[rung.budget] for rung in LADDERS["gpu"].rungs]
    said = one(r"(successive halving on the `gpu` ladder, [^.]+)\.", readme)
    assert count(one(r"trains ([\d.]+M) tokens", said)) == gpu[0].tokens
    assert f"the best {LADDERS['gpu'].rungs[1].keep} " in said and f"the best {LADDERS['gpu'].rungs[2].keep} " in said
    assert f"grow to `{gpu[1].extrapolate_to}` for {gpu[1].tokens // 10**6}M tokens at three rates" in said
    assert len(gpu[1].lrs) == 3
    assert f"continue to {gpu[2].tokens // 10**6}M tokens on {gpu[2].seeds} seeds" in said
    lengths = one(r"The sequence length is the ladder's: ([^.]+)\.", readme)
    smoke = LM_BUDGETS[LADDERS["smoke"].rungs[0].budget]
    assert lengths == (f"{smoke.seq_len} tokens on `smoke`, {cpu[0].seq_len} on `cpu`, {gpu[0].seq_len:,} at rung 0 "
                       f"of `gpu` and {gpu[1].seq_len:,} at its rungs at `{gpu[1].extrapolate_to}` widths")


# ----------------------------------------------------------------------------------------------- defaults


def flag_rows() -> dict[str, str]:
    rows = table(section(page("docs/search.md"), "Choosing flags by task"), "| task | flags |")
    return {row[0]: row[1] for row in rows}


def test_the_search_guide_states_the_defaults_and_choices():
    """docs/search.md's flags table: each default it names is ``SearchConfig``'s, and each list of choices is the
    one ``search.config`` accepts."""
    from search.config import SAMPLERS, STRATEGIES, SearchConfig
    from search.fidelity import LADDERS

    fields = SearchConfig.__dataclass_fields__
    rows = flag_rows()
    assert one(r"`--primitives (\w+)` \(default", rows["what to search"]) == fields["primitives"].default
    assert int(one(r"`--layers (\d+)`", rows["what to search"])) == fields["layers"].default
    ladder = rows["the ladder and its budget"]
    assert one(r"default `([\w-]+)`\)", ladder) == fields["widths"].default
    assert one(r"`--budget ([\w|]+)`", ladder).split("|") == list(LADDERS)
    assert int(one(r"`--trials N` \([^)]*default (\d+)\)", ladder)) == fields["trials"].default
    growth = rows["how the answer is grown"]
    assert one(r"`--attention-at-target (\w+)` \(default", growth) == fields["attention_at_target"].default
    algorithm = rows["search algorithm"]
    offered = choices(one(r"(`--sampler [^;]*);", algorithm))
    assert offered == list(SAMPLERS), f"docs/search.md offers samplers {offered}, search.config {list(SAMPLERS)}"
    # the default sampler: SearchConfig leaves it None, which is gp for one objective (search.config.sampler_name)
    assert one(r"`--sampler (\w+)` \(default\)", algorithm) == SearchConfig().sampler_name
    strategies = choices(one(r"(`--strategy [^;]*);", algorithm))
    assert sorted(strategies) == sorted(STRATEGIES), f"docs/search.md's strategies {strategies}"
    assert one(r"`--wandb ([\w|]+)`", rows["logging"]).split("|")[0] == fields["wandb"].default


def test_the_search_help_and_readme_agree_on_the_default_trials():
    from search.config import SearchConfig

    trials = SearchConfig.__dataclass_fields__["trials"].default
    reference = page("docs/usage/search-reference.md")
    assert f"{trials} trials" in one(r"composer search +# ([^\n]+)", reference)


def test_a_study_name_covers_the_settings_the_guide_names():
    """docs/search.md lists the settings a study's name digests: ``search.config.SCORE_SETTINGS_DIGESTED``."""
    from search.config import SCORE_SETTINGS_DIGESTED

    said = one(r"the\s+`SearchConfig` fields ([^)]+)\)", page("docs/search.md"))
    assert re.findall(r"`(\w+)`", said) == list(SCORE_SETTINGS_DIGESTED)


# ----------------------------------------------------------------------------------------------- training


def test_the_training_example_states_the_tokens_it_trains():
    """docs/usage/training.md's first example: the tokens, steps and batch it says the run trains are ``--tokens``
    rounded down to whole optimizer steps of ``TrainConfig``'s default batch and sequence length."""
    from composer.training.config import DEFAULT_PRESET, TrainConfig

    guide = page("docs/usage/training.md")
    block = re.search(r"```bash\n(.*?)```", guide, flags=re.DOTALL).group(1)
    argv = shlex.split(block.splitlines()[0], comments=True)
    assert argv[:2] == ["composer", "train"]
    asked = int(argv[argv.index("--tokens") + 1])
    assert argv[argv.index("--preset") + 1] == DEFAULT_PRESET
    fields = TrainConfig.__dataclass_fields__
    batch, seq_len = fields["batch_size"].default, fields["seq_len"].default
    steps = asked // (batch * seq_len)
    text = re.sub(r"\s+", " ", guide)
    said = one(r"trains ([\d,]+) of the ([\d,]+) tokens asked: (\d+) optimizer steps of (\d+) sequences of (\d+) "
               r"tokens", text)
    assert [int(n.replace(",", "")) for n in said] == [steps * batch * seq_len, asked, steps, batch, seq_len]


@pytest.mark.parametrize("number, tokens", [("8,192", 8192), ("100K", 100_000), ("5M", 5_000_000),
                                            ("1,048,576", 1_048_576)])
def test_counts_read_as_printed(number, tokens):
    assert count(number) == tokens
