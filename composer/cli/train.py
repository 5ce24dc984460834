"""``composer train``: train an architecture (preset or pattern) on a text source and write <out>/summary.json."""

from __future__ import annotations

import argparse
import dataclasses

from composer.cli.format import is_main_process, print_json
from composer.training.config import PRECISIONS, STRATEGIES, WANDB_MODES, TrainConfig

HELP = {
    "arch": "a preset name or a layer pattern such as '(AM)x2' (widths from --preset; default tiny)",
    "preset": "widths for a pattern --arch",
    "data": "Hugging Face dataset name, or a local .txt/.jsonl/.parquet file, glob or directory "
    "(default: the offline corpus)",
    "tokenizer": "Hugging Face tokenizer name or path (default: the offline byte-level tokenizer)",
    "tokens": "training tokens (rounded down to whole optimizer steps)",
    "batch_size": "global batch in sequences",
    "micro_batch_size": "sequences per device and forward pass (default: batch size / devices)",
    "strategy": "auto (single device, or FSDP2 on several), single, ddp or fsdp",
    "precision": "auto: bf16-mixed on GPUs with bf16 and CPUs with native bf16 (AVX-512 BF16, AMX), else 32-true",
    "warmup": "warmup: a fraction of the steps (< 1) or a number of steps",
    "wandb": "auto: online with an API key, else offline; off disables W&B",
    "devices": "devices per node, or 'auto'",
    "seed": "training seed: initialisation and data order (never the validation split)",
    "data_seed": "chooses the held-out validation documents (default 0; the same for every --seed)",
    "val_tokens": "tokens scored by the final validation (default: the whole held-out split)",
    "val_batches": "micro-batches per validation during training (the loss curve; the final one reads them all)",
    "progress": "print the run's step lines (default on)",
    "curve_points": "record a learning curve: about N validations spaced in log-steps (summary.json's curve)",
    "curve_tokens": "held-out tokens per curve point (default 8192; the final validation reads --val-tokens)",
    "repeat_share": "share of training windows that repeat a span of their own text later in the window, a "
    "recall-bearing stream (default 0; validation text is never changed)",
    "repeat_span": "tokens per repeated span (default 64 bytes or 32 subword tokens, at most seq_len / 4)",
    "max_documents": "use only the first N documents (quick smoke runs)",
    "options": "per-primitive options as JSON, e.g. '{\"W\": {\"window\": 1024}}' (see docs/primitives.md)",
    "init_from": "start from this model (a Composer model directory or a transformers checkpoint): its widths, "
    "vocabulary, tokenizer and weights, mapped onto --arch as composer hybridize does",
    "teacher": "distil this model's next-token distribution (KL); see composer hybridize",
    "distill_temperature": "temperature of the distillation KL (default 1)",
    "kl_weight": "with --teacher: loss = w * KL + (1 - w) * cross-entropy (default 1)",
    "hidden_weight": "with --teacher: add this times the per-layer MSE between residual streams",
    "freeze": "comma-separated groups not trained: mlp, embeddings, attention, norms (needs --init-from)",
    "throughput_only": "measure tokens/s and MFU only: no validation, no checkpoints, no exported weights "
    "(summary.json's val_loss is null)",
    "supernet_keep": "composer hybridize --search's supernet: keep this many random teacher attention layers per step",
}
CHOICES = {"strategy": STRATEGIES, "precision": PRECISIONS, "wandb": WANDB_MODES, "schedule": ("cosine", "wsd", "constant")}


def _scalar_type(annotation: str):
    """The parser type of a TrainConfig field annotation such as ``'int | None'``."""
    for name, kind in (("bool", bool), ("int | str", str), ("int", int), ("float", float)):
        if annotation.startswith(name):
            return kind
    return str


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train an architecture and measure loss and throughput",
        description="Train a preset or pattern with Lightning (single device, DDP or FSDP2). Options override "
        "--recipe; with no --data it trains offline on the default corpus.",
    )
    parser.add_argument("--recipe", help="YAML recipe whose keys are these options (see recipes/train/)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = _scalar_type(str(field.type))
        kwargs = {"dest": field.name, "default": None, "help": HELP.get(field.name)}
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            parser.add_argument(flag, type=kind, choices=CHOICES.get(field.name), **kwargs)
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
    if args.recipe:
        return TrainConfig.from_recipe(args.recipe, **given)
    return TrainConfig(**{k: v for k, v in given.items() if v is not None})


def run(args: argparse.Namespace) -> int:
    from composer.training.run import train

    config = config_from_args(args)
    summary = train(config, resume=args.resume)
    if not is_main_process():
        return 0
    if args.json:
        print_json(summary)
    else:
        keys = ("pattern", "params", "tokens", "val_loss", "val_ppl", "val_tokens", "val_fingerprint",
                "tokens_per_s", "mfu", "wall_time_s")
        for key in keys:
            if summary.get(key) is not None:
                value = summary[key]
                print(f"{key:<13} {value:,.4f}" if isinstance(value, float) else f"{key:<13} {value}")
        print(f"summary       {config.out}/summary.json")
    return 0
