"""``composer search``: Optuna search over layer interleavings; prints the leaderboard, writes results to --out."""

from __future__ import annotations

import argparse
import sys

from composer.cli.format import print_json
from composer.errors import ConfigError

FLAGS = {
    # option: (type, help)
    "layers": (int, "searched layers (default 6; the paper also uses 16)"),
    "primitives": (str, "layer tokens a layer may be (default AM; e.g. \"AMS[AS]\" adds Mamba-2 and a "
                        "parallel A+S layer)"),
    "strategy": (str, "auto (default: successive-halving with the lm evaluator and one objective, else "
                      "one-shot), one-shot, end-incremental, middle-incremental, or successive-halving (lm only: "
                      "rungs of rising tokens, the last at the target; --budget names the ladder: smoke, cpu, gpu)"),
    "depth": (int, "final depth of incremental strategies (default 2 x --layers)"),
    "sampler": (str, "gp (default, Bayesian optimisation), tpe, random, brute, nsga2 (default with 2+ objectives)"),
    "objectives": (str, "comma-separated: score[,kv][,tokens_per_s] (kv: KV-cache bytes at --target widths); "
                        "under successive-halving score[,recall][,kv]: the rungs rank by score, the finalists' "
                        "front on all (recall: the finalists' probe; kv: cache at 32K tokens)"),
    "min_recall": (str, "successive-halving: the answer must recall at least this fraction at the probe's longest "
                        "length (1,024 tokens), or 'known': as much as the best known layout with attention; "
                        "probes every finalist (about 10 min each on 2 CPU cores)"),
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
    "widths": (str, "preset whose widths candidates train at (default search-1m)"),
    "target": (str, "preset the KV-cache objective and reports use, and successive-halving's last rung trains at "
                    "(default: under successive-halving the ladder's last rung's, e.g. demo-4m for --budget cpu; "
                    "under one-shot and the incremental strategies llama-3.2-1b)"),
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
    "attention_at_target": (str, "repeat (default): a searched pattern's attention layers are stacked with it to "
                                 "the target's size; keep: the model at the target keeps as many attention layers "
                                 "as the pattern has, at the middles of its depth (Nemotron-H's placement), so a "
                                 "pattern with one attention layer holds one layer's KV cache at any depth"),
    "precision": (str, "auto (default: bf16 where the GPU or CPU computes it natively, else fp32), fp32, bf16"),
    "workers": (int, "local worker processes, trials evaluated concurrently (spread over the GPUs; CPU threads "
                "split between them)"),
    "storage": (str, "Optuna storage URL or journal file (default: sqlite in --out)"),
    "study": (str, "study name (default: derived from the settings, so re-running resumes)"),
    "seed": (int, "sampler and training seed"),
    "wandb": (str, "auto (default: online with an API key, else offline), online, offline, off"),
    "out": (str, "output directory (default runs/search)"),
}


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
            "(--budget smoke --trials 3 --widths tiny: a plumbing check of a few minutes). Options override --recipe.")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search layer interleavings with Optuna (the main job)",
        description=default_search_text(),
    )
    parser.add_argument("--recipe", help="YAML recipe whose keys are these options (see recipes/search/)")
    for name, (kind, text) in FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=None, help=text)
    parser.add_argument("--compile", dest="compile", action="store_true", default=None,
                        help="torch.compile every candidate (pays off on GPUs; on CPU compiling costs more than a "
                        "cpu-budget candidate trains)")
    parser.add_argument("--no-prune", dest="prune", action="store_false", default=None,
                        help="do not stop unpromising trials early")
    parser.add_argument("--no-known", dest="known", action="store_false", default=None,
                        help="do not start with Llama and the published layouts the primitives can express")
    parser.add_argument("--json", action="store_true", help="print the leaderboard as JSON")
    parser.set_defaults(handler=run)


def parse_shares(text: str | None, flag: str) -> dict[str, float] | None:
    if text is None:
        return None
    shares = {}
    for part in text.split(","):
        symbol, _, value = part.partition("=")
        try:
            shares[symbol.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--{flag} expects SYMBOL=FRACTION[,...], e.g. A=0.25, got {text!r}") from None
    return shares


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
    if args.recipe:
        config = SearchConfig.from_recipe(args.recipe, **given)
    else:
        config = SearchConfig(**{k: v for k, v in given.items() if v is not None})
    result = run_search(config, echo=lambda line: print(line, file=sys.stderr))
    if args.json:
        print_json(result["leaderboard"])
    else:
        print(summary_text(result))
    return 0
