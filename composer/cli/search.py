"""``composer search``: Optuna search over layer interleavings; prints the leaderboard, writes results to --out."""

from __future__ import annotations

import argparse
import sys

from composer.cli.format import RenamedFlag, print_json
from composer.cli.parsing import layers_or_family, seed_number
from composer.errors import ConfigError

FLAGS = {
    # option: (type, help)
    "layers": (int, "searched layers (default 6; the paper also uses 16); with --space mixers the most mixers"),
    "primitives": (str, "layer tokens a layer may be (default AM; e.g. \"AMS[AS]\" adds Mamba-2 and a "
                        "parallel A+S layer)"),
    "space": (str, "layers (default): a primitive per layer, --layers of them; mixers: Nemotron-Flash's space, "
                   "mixers (every primitive but M and E) each followed by 0, 1 or 2 MLPs, from half of --layers to "
                   "--layers of them"),
    "strategy": (str, "auto (default: successive-halving with the lm evaluator and one objective, else "
                      "one-shot), one-shot, end-incremental, middle-incremental, or successive-halving (lm only: "
                      "rungs of rising tokens, the last at the target; --budget names the ladder: smoke, cpu, gpu)"),
    "depth": (int, "the layers incremental strategies grow the pattern to (default 2 x --layers)"),
    "sampler": (str, "gp (default, Bayesian optimisation), tpe, random, brute, nsga2 (default with 2+ objectives, except "
                     "under successive-halving, whose rungs rank by the score alone: gp there)"),
    "objectives": (str, "comma-separated: score[,kv][,tokens_per_s] (kv: KV-cache bytes at --target widths); "
                        "under successive-halving score[,recall][,kv]: the rungs rank by score, the finalists' "
                        "front on all (recall: the finalists' probe; kv: cache at 32K tokens)"),
    "min_recall": (str, "successive-halving: the answer must recall at least this fraction at the probe's longest "
                        "length (1,024 tokens), or 'known': as much as the known layout with attention that has the "
                        "best loss; probes every finalist (about 10 min each on 2 CPU cores)"),
    "recall_budget": (str, "search.recall budget of the finalists' probe (default probe; probe-smoke: a plumbing "
                           "check)"),
    "confirm_seeds": (int, "successive-halving: train the best new and the best known finalist to this many seeds "
                           "at the last rung (default 1: the budget's measured seed spread stands in for the rest), "
                           "so that the answer rests on a paired interval; 3 adds 4 runs at the target"),
    "trials": (int, "number of trials (default 20)"),
    "timeout": (float, "stop starting trials after this many seconds"),
    "evaluator": (str, "lm (default: validation loss on text, at the better of two learning rates per "
                       "candidate), mad (synthetic tasks) or recall (MQAR accuracy over lengths 64-1,024)"),
    "budget": (str, "named evaluation budget: smoke, cpu (default), gpu, ..."),
    "widths": (str, "preset whose widths candidates train at (default search-1m, printed; was --widths)"),
    "target": (str, "preset the KV-cache objective and reports use, and successive-halving's last rung trains at "
                    "(default, printed: under successive-halving the ladder's last rung's, e.g. demo-4m for --budget "
                    "cpu; under one-shot and the incremental strategies llama-3.2-1b)"),
    "data": (str, "lm evaluator: text source (default: the offline corpus)"),
    "text_field": (str, "lm evaluator: the field of --data's JSON or Parquet records that holds the text (default "
                        "text); checked on the first record before anything trains"),
    "tokenizer": (str, "lm evaluator: tokenizer (default: the offline byte tokenizer)"),
    "min_share": (str, "minimum shares per primitive, e.g. A=0.2"),
    "max_share": (str, "maximum shares per primitive, e.g. A=0.5"),
    "max_params": (int, "maximum non-embedding parameters at the search widths (a positive number)"),
    "max_kv": (str, "BYTES@LENGTH, e.g. 64MiB@32K: the most inference cache (KV, windows, fixed states; bf16) one "
                    "sequence of LENGTH tokens may hold on the model at --target; candidates over it are skipped "
                    "before they train. Units in any case: KB/MB/GB are powers of 1,000 (10MB: 10,000,000 bytes), "
                    "KiB/MiB/GiB powers of 1,024; a length's K is 1,024 tokens"),
    "max_latency": (str, "MS or known: the most decode milliseconds per token at batch 1 of a candidate's model at "
                         "the target (known: no slower than the known layouts); measured on this machine, or modeled "
                         "with --cost-device; candidates over it are skipped before they train"),
    "min_throughput": (str, "TOK_S or known: the least training tokens/s of a candidate's model at the target (known: "
                            "no slower to train than the known layouts); as --max-latency"),
    "cost_device": (str, "where --max-latency, --min-throughput and --equal-cost are costed: cpu, h100 or h200 "
                         "through the cost model (composer info --cost-device); default: the limits measured on the "
                         "machine the search runs on, --equal-cost modeled on cpu"),
    "equal_cost": (str, "FAMILY (e.g. nemotron-h): grow every model at the target to equal cost instead of equal "
                        "size: each layout (by the growth rule) at the widest d_model whose cost on --cost-device is "
                        "no more than FAMILY's own layout's at --deployed-at, so loss ranks models of equal cost"),
    "deployed_at": (str, "with --equal-cost: the preset the answer will be deployed at, where cost is taken (default: "
                         "the target); a larger one is scaled down to the target as FAMILY's layout is"),
    "equal_cost_figure": (str, "with --equal-cost: the cost held equal: both (default; the binding one wins), decode "
                               "(ms per token at batch 1 after 4,096 tokens) or train (training tokens/s)"),
    "attention_at_target": (str, "repeat (default): a searched pattern's attention layers are stacked with it to "
                                 "the target's size; keep: the model at the target keeps as many attention layers "
                                 "as the pattern has, at the middles of its depth (Nemotron-H's placement), so a "
                                 "pattern with one attention layer holds one layer's KV cache at any depth"),
    "depth_at_target": (layers_or_family, "N or a family's name (e.g. nemotron-h: its own depth at the target): "
                                          "every model at the target has exactly N layers, its widths (d_model, "
                                          "heads, MLP) scaled to the target's size, so layouts compare at one depth "
                                          "and only their mixers differ (default: grown by depth at the target's "
                                          "widths)"),
    "precision": (str, "auto (default: bf16 where the GPU or CPU computes it natively, else fp32), fp32, bf16 "
                       "(autocast, fp32 weights; 32-true and bf16-mixed, composer train's names, also work)"),
    "workers": (int, "local worker processes, trials evaluated concurrently (spread over the GPUs; CPU threads "
                "split between them)"),
    "storage": (str, "Optuna storage URL or journal file (default: sqlite in --out)"),
    "study": (str, "study name (default: derived from the settings, so re-running resumes)"),
    "seed": (seed_number, "sampler and training seed"),
    "wandb": (str, "auto (default: online with an API key, else offline), online, offline, off"),
    "wandb_project": (str, "W&B project (default composer-search)"),
    "out": (str, "output directory (default runs/search)"),
}
# the flag of a field whose user-facing name differs from SearchConfig's (issue 49: --widths is now --preset, as on
# every other command; the field keeps its name, which study names' digests are keyed by), and the old spellings
# --depth is --final-layers: --depth-at-target is the depth a model at the target has, on every command
FLAG_NAMES = {"widths": "preset", "depth": "final-layers"}
RENAMED = {"widths": "widths", "depth": "depth"}  # old flag -> the field it sets


# `composer search --help` shows the flags above these groups (issue 49: it was 133 lines of internals);
# `--help-all` shows every flag, the advanced ones in these groups. Every flag works whichever help shows it.
GROUPS = {
    "advanced: search algorithm": ("space", "depth", "sampler", "objectives", "evaluator", "timeout", "seed", "prune",
                                   "known"),
    "advanced: ladder and budget": ("min_recall", "recall_budget", "confirm_seeds", "attention_at_target",
                                    "depth_at_target", "precision", "compile"),
    "advanced: constraints": ("min_share", "max_share", "max_params", "max_kv", "max_latency", "min_throughput",
                              "cost_device"),
    "advanced: equal cost": ("equal_cost", "deployed_at", "equal_cost_figure"),
    "advanced: data": ("text_field", "tokenizer"),
    "distributed and storage": ("storage", "study", "wandb", "wandb_project"),
}
ADVANCED = {name: title for title, names in GROUPS.items() for name in names}


class _Help(argparse.Action):
    """``-h``: the common flags and a pointer to ``--help-all``; ``--help-all``: every flag, grouped."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None, every=False):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.every = every

    def __call__(self, parser, namespace, values, option_string=None):
        hidden = [] if self.every else [a for a in parser._actions if getattr(a, "advanced", False)]
        shown = [a.help for a in hidden]
        for action in hidden:
            action.help = argparse.SUPPRESS
        topics = ", ".join(title.removeprefix("advanced: ") for title in GROUPS)
        parser.epilog = None if self.every else f"composer search --help-all: {len(hidden)} more flags ({topics})"
        parser.print_help()
        for action, text in zip(hidden, shown):
            action.help = text
        parser.exit()


def default_search_text() -> str:
    """The help's account of a bare ``composer search``. Its counts and rungs come from SearchConfig's defaults and
    the ladder's own description, so a changed default cannot leave the help describing another search (issue 34:
    it described the one-shot 400K-token search that successive halving replaced)."""
    from composer.pattern import layers
    from search.config import SearchConfig
    from search.fidelity import LADDERS

    ladder = LADDERS[SearchConfig.budget]
    primitives = "/".join(layers(SearchConfig.primitives))
    return ("Bayesian-optimisation search over layer patterns, each candidate scored by its validation loss after a "
            f"short training run. With no arguments: successive halving on the {ladder.name} ladder over "
            f"{SearchConfig.trials} candidates, {SearchConfig.layers}-layer {primitives} patterns, Llama and the "
            f"paper's AAMMMM first, then GP proposals: {ladder.description}; on the CPU, about 25 minutes on 2 idle cores "
            "(--budget smoke --trials 3 --preset tiny: a plumbing check of a few minutes). Options override --recipe.")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search layer interleavings with Optuna (the main job)",
        description=default_search_text(),
        add_help=False,
    )
    parser.add_argument("-h", "--help", action=_Help, help="show the common flags and exit")
    parser.add_argument("--help-all", action=_Help, every=True, help="show every flag, the advanced ones grouped")
    groups = {title: parser.add_argument_group(title) for title in GROUPS}

    def add(name: str, *flags: str, **kwargs) -> None:
        action = (groups[ADVANCED[name]] if name in ADVANCED else parser).add_argument(*flags, **kwargs)
        action.advanced = name in ADVANCED

    add("recipe", "--recipe", help="YAML recipe whose keys are these options (see recipes/search/)")
    for name, (kind, text) in FLAGS.items():
        flag = FLAG_NAMES.get(name, name)
        add(name, "--" + flag.replace("_", "-"), dest=name, metavar=flag.upper(), type=kind, default=None, help=text)
    for old, name in RENAMED.items():
        parser.add_argument("--" + old, dest=name, new=FLAG_NAMES[name], action=RenamedFlag, type=FLAGS[name][0],
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    add("compile", "--compile", dest="compile", action="store_true", default=None,
        help="torch.compile every candidate, and time the finalists' decode step compiled (pays off on GPUs; on CPU "
        "compiling costs more than a cpu-budget candidate trains)")
    add("prune", "--no-prune", dest="prune", action="store_false", default=None,
        help="do not stop unpromising trials early")
    add("known", "--no-known", dest="known", action="store_false", default=None,
        help="do not start with Llama and the published layouts the primitives can express")
    add("json", "--json", action="store_true", help="print the leaderboard as JSON")
    add("plan", "--plan", action="store_true", help="print the plan (rungs, runs, workers' GPUs, estimated wall time and "
        "GPU-hours, storage) and exit without training; with --json as JSON")
    parser.hints["--resume"] = ("run the same command without --resume: a search resumes by itself (its study in "
                                "--out is found by its settings)")
    parser.set_defaults(handler=run)


def parse_shares(text: str | None, flag: str) -> dict[str, float] | None:
    if text is None:
        return None
    shares = {}
    for part in text.split(","):
        symbol, _, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            raise ConfigError(f"--{flag} expects SYMBOL=FRACTION[,...], e.g. A=0.25, got {text!r}") from None
        if symbol.strip() in shares:  # the last would win without a word
            raise ConfigError(f"--{flag} {text} gives {symbol.strip()} twice ({shares[symbol.strip()]:g} and "
                              f"{share:g}): give each primitive one share")
        shares[symbol.strip()] = share
    return shares


def default_notes(config, given: set[str]) -> list[str]:
    """The lines that name the presets the search chose itself (issue 49: a preset a command builds at is printed
    where the user did not give it): the candidates' widths, and the target the answer is grown to and costed at."""
    from composer.presets import default_preset_note

    notes = []
    if "widths" not in given:
        notes.append(default_preset_note(config.widths, "the widths candidates train at"))
    if "target" not in given:
        halving = config.strategy == "successive-halving"
        why = f"the {config.budget} ladder's last rung's" if halving else "the default"
        what = "the size the answer is grown to" + (", trained at last" if halving else "") + " and costed at"
        notes.append(default_preset_note(config.report_target, what, flag="--target", why=why))
    return notes


def run(args: argparse.Namespace) -> int:
    from search.config import SearchConfig
    from search.run import run_search
    from search.summary import summary_text

    given = {name: getattr(args, name) for name in FLAGS}
    given["prune"] = args.prune
    given["compile"] = args.compile
    given["known"] = args.known
    given["min_share"] = parse_shares(args.min_share, "min-share")
    given["max_share"] = parse_shares(args.max_share, "max-share")
    values = SearchConfig.recipe_values(args.recipe) if args.recipe else {}
    values.update({k: v for k, v in given.items() if v is not None})
    config = SearchConfig(**values)
    if args.plan:  # search.plan: nothing is trained, no storage opened
        from search.plan import plan_search, plan_text

        plan = plan_search(config)
        if args.json:
            print_json(plan)
        else:
            print(plan_text(plan))
        return 0
    notes = default_notes(config, set(values))  # the presets it chose, printed once the settings are accepted
    result = run_search(config, echo=lambda line: print(line, file=sys.stderr), notes=notes)
    if args.json:
        print_json(result["leaderboard"])
    else:
        print(summary_text(result))
        from search.tracking import runs_line

        if runs_line(config):
            print(runs_line(config))
    return 0
