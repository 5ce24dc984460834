"""``composer transfer``: does the search score predict the loss at the target scale? (composer/experiments/transfer.py)"""

from __future__ import annotations

import argparse
import sys

from composer.cli.format import RenamedFlag, old_spelling, print_json

# flags that set a field of the shared training settings (TrainConfig), as `composer train` names them
TRAIN_FLAGS = {
    "tokens": (int, "training tokens per run (default 500000: the smallest CPU budget measured to rank "
                    "patterns, docs/evidence.md)"),
    "data": (str, "training text, as composer train --data (default: the offline corpus)"),
    "tokenizer": (str, "tokenizer, as composer train --tokenizer (default: byte-level)"),
    "max_documents": (int, "use only the first N documents of the data"),
    "seq_len": (int, "sequence length"),
    "batch_size": (int, "global batch in sequences"),
    "lr": (float, ("peak learning rate, the same for every pattern (default: each pattern's rate from the search "
                   "when its trials recorded one, else 2e-3; see --lr-sweep)")),
    "lr_sweep": (str, "comma-separated rates (e.g. 1e-3,2e-3,3e-3,6e-3): every pattern first trains at each on a "
                      "short budget and uses its best for all its seeds"),
    "lr_sweep_fraction": (float, "share of --tokens per sweep run (default 0.25)"),
    "precision": (str, "training precision, as composer train --precision"),
    "val_tokens": (int, "tokens of the final validation (default: the whole held-out split)"),
    "data_seed": (int, "chooses the held-out documents (default 0, the same for every run)"),
    "wandb": (str, "auto, online, offline or off"),
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transfer",
        help="measure whether search scores predict the loss at a target scale (rank correlation over seeds)",
        description="Pick --patterns N patterns spread over a search's score range (or the ones --patterns names), "
                    "extrapolate each to --target, "
                    "train each once per seed, and report the Spearman and Kendall correlation between search "
                    "score and mean target loss with a bootstrap interval, and the target's own between-seed "
                    "agreement (the noise ceiling). Writes transfer.json/.md/.png; finished runs are kept, so a "
                    "killed run resumes.",
    )
    # --from-search, as on every command that reads a search (docs/usage/vocabulary.md); a transfer reads its
    # ranking, from a directory or any storage that holds one
    old_spelling(parser, "--search", parser.add_argument(
        "--from-search", dest="search", metavar="DIR|FILE|URL",
        help="a composer search --out directory, leaderboard.json, study.db or storage URL; its ranking, its "
             "--attention-at-target and its rates are read"))
    parser.add_argument("--study", help="the study, when the storage holds several")
    parser.add_argument("--recipe", help="YAML with TransferConfig fields (see recipes/transfer/); flags win")
    old_spelling(parser, "--k", parser.add_argument(
        "--patterns", metavar="N|P1,P2", help="how many patterns to spread over the score range (default 8), or "
                                              "comma-separated scored patterns to use instead of a spread"))
    parser.add_argument("--rung", help="for a successive-halving search: the rung whose ranking --patterns N is spread "
                                       "over, "
                                       "an index or 'last' (default 0: every candidate; the final leaderboard "
                                       "holds only the last rung's finalists)")
    parser.add_argument("--target", metavar="PRESET", help="target preset (default demo-4m)")
    parser.add_argument("--to", dest="target", action=RenamedFlag, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument("--method", choices=("auto", "stack", "stretch"), help="extrapolation (default auto)")
    old_spelling(parser, "--attention", parser.add_argument(
        "--attention-at-target", dest="attention", choices=("repeat", "keep"),
        help="how the patterns' attention layers grow to --target (default: the search's --attention-at-target, "
             "read from its config.json; repeat where none is found)"))
    parser.add_argument("--seeds", help="a count (3 = seeds 0,1,2; default) or comma-separated seeds")
    parser.add_argument("--baseline", help="the parameter-matched baseline each pattern is compared with, paired over "
                                           "seeds: llama (default), striped-1:R, or none")
    parser.add_argument("--n-boot", dest="n_boot", type=int, help="bootstrap replicates (default 10000)")
    parser.add_argument("--workers", type=int, help="runs trained at once, each in its own process (default 1; "
                                                    "small models leave a GPU or a many-core CPU mostly idle)")
    parser.add_argument("--out", help="output directory (default runs/transfer)")
    parser.add_argument("--json", action="store_true", help="print transfer.json")
    for name, (kind, text) in TRAIN_FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=f"train_{name}", type=kind, help=text)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from composer.experiments.transfer import Transfer, TransferConfig, format_report

    overrides = {name: getattr(args, name) for name in ("search", "study", "patterns", "rung", "target", "method",
                                                         "attention", "seeds", "baseline", "n_boot", "workers", "out")}
    overrides.update({f"train.{name}": getattr(args, f"train_{name}") for name in TRAIN_FLAGS})
    config = TransferConfig.from_recipe(args.recipe, **overrides)
    report = Transfer(config, echo=lambda line: print(line, file=sys.stderr)).run()
    if args.json:
        print_json(report)
    else:
        print(format_report(report))
        print(f"\ntransfer.{{json,md,png}} in {config.out}")
    return 0
