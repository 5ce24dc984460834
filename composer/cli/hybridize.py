"""``composer hybridize --init-from DIR --arch P``: replace attention layers of a pretrained model by other mixers and
distil the original into the result (composer/hybridize/student.py, composer/hybridize/distill.py)."""

from __future__ import annotations

import argparse

from composer.cli.format import RenamedFlag, is_main_process, old_spelling, print_json, print_rows
from composer.cli.parsing import given_options, seed_number

DEFAULT_FREEZE = "mlp,embeddings"
NUMBER_TYPES: dict[str, type] = {}  # filled by add_parser: the numeric options' types, which recipe values must have
# old recipe keys, read under their new names with a notice: the old flags' names (their RenamedFlag actions), so a
# recipe and the command line accept the same old spellings; filled by add_parser
OLD_KEYS: dict[str, str] = {}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hybridize",
        help="turn a pretrained Transformer into a hybrid by distillation",
        description="Build the hybrid --arch PATTERN over the model in --init-from (same depth and FFN layers; "
                    "attention layers become the mixers the pattern names, initialised from the attention weights "
                    "where a mapping exists), freeze the MLPs and embeddings, and distil the original model's "
                    "next-token distribution into it (KL at --distill-temperature). Runs on Lightning like composer "
                    "train: --resume continues a killed run; <out>/summary.json holds val_loss, the KL to the "
                    "teacher and the cache against the teacher's.",
    )
    parser.add_argument("--recipe", help="YAML whose keys are these options (init_from, arch, out, tokens, ...; see "
                                         "recipes/hybridize-llama-3.2-1b.yaml); flags win")
    old_spelling(parser, "--from", parser.add_argument(
        "--init-from", metavar="DIR", help="the model the hybrid starts from and distils (its teacher): a Composer "
                                           "model directory (composer train's <out>/model, or composer import's "
                                           "output)"))
    old_spelling(parser, "--pattern", parser.add_argument(
        "--arch", metavar="PATTERN", help="the hybrid, one token per teacher layer, e.g. 'AMDMDMDM' for an (AM)x4 "
                                          "teacher"))
    parser.add_argument("--out", help="run directory")
    parser.add_argument("--data", help="training text, as composer train --data (default: the offline corpus)")
    parser.add_argument("--tokenizer", help="default: the teacher's")
    parser.add_argument("--tokens", type=int, default=1_000_000, help="distillation tokens (default 1,000,000)")
    parser.add_argument("--seq-len", dest="seq_len", type=int, default=256)
    parser.add_argument("--batch-size", dest="batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    old_spelling(parser, "--temperature", parser.add_argument(
        "--distill-temperature", type=float, default=1.0, help="temperature of the distillation KL (default 1)"))
    parser.add_argument("--kl-weight", dest="kl_weight", type=float, default=1.0,
                        help="loss = w * KL + (1 - w) * cross-entropy (default 1: pure distillation)")
    parser.add_argument("--hidden-weight", dest="hidden_weight", type=float, default=0.0,
                        help="add this times the per-layer MSE between student and teacher residual streams")
    parser.add_argument("--freeze", default=DEFAULT_FREEZE,
                        help=f"groups not trained: mlp, embeddings, attention, norms (default {DEFAULT_FREEZE}; "
                             "'' trains everything)")
    parser.add_argument("--options", help="per-primitive options as JSON (override the mapped S/D geometry)")
    parser.add_argument("--max-documents", dest="max_documents", type=int)
    parser.add_argument("--val-tokens", dest="val_tokens", type=int)
    parser.add_argument("--precision", default="auto",
                        help="training precision, as composer train's: auto (default), fp32, bf16, bf16-true, or "
                             "Lightning's 32-true, bf16-mixed, 16-mixed")
    parser.add_argument("--devices", default="1", help="devices per node, or 'auto' (several: FSDP2 by default)")
    parser.add_argument("--parallelism", default="auto", help="auto, single, ddp or fsdp, as composer train")
    parser.add_argument("--strategy", dest="parallelism", action=RenamedFlag, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
    old_spelling(parser, "--accelerator", parser.add_argument(
        "--device", default="auto", help="what the run trains on, as composer train --device: auto (default), cpu, "
                                         "gpu/cuda"))
    parser.add_argument("--seed", type=seed_number, default=0)
    parser.add_argument("--wandb", default="auto")
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    search = parser.add_argument_group(
        "search where attention stays (PostNAS-style; composer/hybridize/supernet.py)",
        "With --search-placement the pattern replaces every attention layer (e.g. DMDMDMDM for (AM)x4). A supernet "
        "learns the replacements beside K randomly kept attention layers, every placement of K is scored on held-out "
        "text without retraining (placements.json/.md/.png), and the best is distilled (<out>/distill). Re-running "
        "the command resumes.")
    old_spelling(search, "--search", search.add_argument("--search-placement", action="store_true",
                                                           help="search where attention stays"))
    search.add_argument("--keep", type=int, help="attention layers that stay (required with --search-placement)")
    search.add_argument("--supernet-tokens", dest="supernet_tokens", type=int,
                        help="tokens of the supernet's training (default: --tokens)")
    search.add_argument("--candidates", type=int, default=256,
                        help="score every placement up to this many, else beam search (default 256)")
    search.add_argument("--beam-width", dest="beam_width", type=int, default=8)
    search.add_argument("--score-tokens", dest="score_tokens", type=int, default=65_536,
                        help="held-out tokens each placement is scored on (default 65,536)")
    search.add_argument("--no-distill", dest="distill", action="store_false",
                        help="stop after ranking the placements")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=run)
    NUMBER_TYPES.update({action.dest: action.type for action in parser._actions if action.type in (int, float)})
    OLD_KEYS.update({flag.lstrip("-").replace("-", "_"): action.dest for action in parser._actions
                     if isinstance(action, RenamedFlag) for flag in action.option_strings})


# recipe keys that differ from the flags' destinations
RECIPE_KEYS = {"no_distill": "distill"}


def apply_recipe(args: argparse.Namespace) -> None:
    """Fill options not given on the command line from ``--recipe``; then check the required ones."""
    from composer.errors import ConfigError
    from composer.training.config import load_recipe

    if args.recipe:
        on_command_line = given_options(args)
        internal = ("recipe", "handler", "json", "resume", "command")
        destinations = [name for name in vars(args) if name not in internal and not name.startswith("_")]
        allowed = sorted({*destinations, *RECIPE_KEYS, *OLD_KEYS} - set(RECIPE_KEYS.values()))
        for key, value in load_recipe(args.recipe, allowed, NUMBER_TYPES).items():
            dest = RECIPE_KEYS.get(key, OLD_KEYS.get(key, key))
            if key == "no_distill":
                value = not value
            if key in OLD_KEYS:
                from composer.training.config import renamed_notice

                renamed_notice(key, dest)
            if dest not in on_command_line:  # a flag wins, even one given at its default value
                setattr(args, dest, value)
    missing = [flag for flag, dest in (("--init-from", "init_from"), ("--arch", "arch"), ("--out", "out"))
               if getattr(args, dest) is None]
    if missing:
        raise ConfigError(f"composer hybridize needs {', '.join(missing)} (on the command line or in --recipe)")


def run(args: argparse.Namespace) -> int:
    from composer.errors import ConfigError
    from composer.precision import parse_precision
    from composer.training.config import TrainConfig
    from composer.training.run import train

    apply_recipe(args)
    args.precision = parse_precision(args.precision)  # before a placement search starts, one line if it is bad
    optional = {name: getattr(args, name) for name in ("data", "tokenizer", "options", "max_documents", "val_tokens")}
    if args.search_placement:
        if args.keep is None:
            raise ConfigError("--search-placement needs --keep K: how many attention layers stay")
        return run_search(args, {k: v for k, v in optional.items() if v is not None})
    if args.keep is not None:
        raise ConfigError("--keep goes with --search-placement (without it the pattern says which attention layers "
                          "stay)")
    config = TrainConfig(
        arch=args.arch, init_from=args.init_from, teacher=args.init_from, out=args.out, tokens=args.tokens,
        seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr, distill_temperature=args.distill_temperature,
        kl_weight=args.kl_weight, hidden_weight=args.hidden_weight, freeze=args.freeze, precision=args.precision,
        seed=args.seed, wandb=args.wandb, devices=args.devices, parallelism=args.parallelism,
        device=args.device, **{k: v for k, v in optional.items() if v is not None},
    )
    if args.resume:
        from composer.cli.train import refuse_nothing_to_resume

        refuse_nothing_to_resume(args.out)
    summary = train(config, resume=args.resume)
    if not is_main_process():
        return 0
    if args.json:
        print_json(summary)
        return 0
    h = summary["hybridize"]
    print_rows([
        ("pattern", f"{summary['compact']} (teacher {h.get('teacher_pattern')})"),
        ("val_loss", f"{summary['val_loss']:.4f}" if summary["val_loss"] is not None else "n/a"),
        ("KL to teacher", f"{h['val_kl']:.4f}" if h["val_kl"] is not None else "n/a"),
        ("cache / seq", f"{h['cache_bytes_per_sequence']:,} B vs teacher {h['teacher_cache_bytes_per_sequence']:,} B "
                        f"({h['cache_ratio']:.0%})"),
        ("frozen", f"{', '.join(h['frozen']) or 'nothing'} ({h['frozen_params']:,} parameters)"),
        *([("W&B run", summary["wandb_run"])] if summary.get("wandb_run") else []),
        ("summary", f"{args.out}/summary.json"),
    ])
    for note in h["init_notes"]:
        print(f"note: {note}")
    return 0


def run_search(args: argparse.Namespace, optional: dict) -> int:
    import sys

    from composer.experiments.placement_search import (
        PlacementSearch,
        PlacementSearchConfig,
        format_placements,
    )

    train = {"tokens": args.tokens, "seq_len": args.seq_len, "batch_size": args.batch_size, "lr": args.lr,
             "distill_temperature": args.distill_temperature, "kl_weight": args.kl_weight,
             "hidden_weight": args.hidden_weight,
             "freeze": args.freeze, "precision": args.precision, "seed": args.seed, "wandb": args.wandb,
             "devices": args.devices, "parallelism": args.parallelism, "device": args.device, **optional}
    config = PlacementSearchConfig(source=args.init_from, pattern=args.arch, keep=args.keep, out=args.out,
                                   train=train, supernet_tokens=args.supernet_tokens, max_candidates=args.candidates,
                                   beam_width=args.beam_width, score_tokens=args.score_tokens,
                                   distill_best=args.distill)
    report = PlacementSearch(config, echo=lambda line: print(line, file=sys.stderr)).run()
    if not is_main_process():
        return 0
    if args.json:
        print_json(report)
    else:
        print(format_placements(report))
    return 0
