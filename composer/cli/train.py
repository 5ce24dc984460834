"""``composer train``: train an architecture (preset or pattern) on a text source and write <out>/summary.json."""

from __future__ import annotations

import argparse
import dataclasses

from composer.cli.equal_cost import add_equal_cost_flags, equal_cost_of
from composer.cli.format import RenamedFlag, is_main_process, old_spelling, print_json, print_rows
from composer.cli.parsing import layers_or_family, seed_number
from composer.errors import ConfigError
from composer.pattern import compact_pattern, layers
from composer.presets import PRESETS, default_preset_note
from composer.training.config import (
    DEFAULT_PRESET,
    DEVICES,
    RENAMED,
    STRATEGIES,
    WANDB_MODES,
    TrainConfig,
)

# help per TrainConfig field; help_text() adds "(default: X)" from the dataclass where the text names no default, so
# that every flag says what it does when left out (issue 49)
HELP = {
    "arch": "a preset name or a layer pattern such as '(AM)x2' (widths from --preset; default (AM)x2 at tiny)",
    "preset": "widths for a pattern --arch (default tiny, printed)",
    "options": "per-primitive options as JSON, e.g. '{\"W\": {\"window\": 1024}}' (see docs/primitives.md; "
    "default: the preset's)",
    "data": "Hugging Face dataset name, or a local .txt/.jsonl/.parquet file, glob or directory "
    "(default: the offline corpus)",
    "tokenizer": "Hugging Face tokenizer name or path (default: the offline byte-level tokenizer)",
    "text_field": "the field of --data's JSON or Parquet records that holds the text",
    "val_fraction": "share of a local source's documents held out for validation (streamed sources hold out their "
    "first documents)",
    "data_seed": "chooses the held-out validation documents (default 0; the same for every --seed)",
    "max_documents": "use only the first N documents, for quick smoke runs (default: all)",
    "repeat_share": "share of training windows that repeat a span of their own text later in the window, a "
    "recall-bearing stream (default 0; validation text is never changed)",
    "repeat_span": "tokens per repeated span (default 64 bytes or 32 subword tokens, at most seq_len / 4)",
    "num_workers": "data loader worker processes",
    "data_cache": "token cache directory (default $COMPOSER_CACHE/data, else ~/.cache/composer/data)",
    "tokens": "training tokens (rounded down to whole optimizer steps)",
    "seq_len": "tokens per training sequence",
    "batch_size": "global batch in sequences",
    "micro_batch_size": "sequences per device and forward pass (default: batch size / devices)",
    "lr": "peak learning rate (AdamW)",
    "min_lr_ratio": "the schedule's final rate as a share of --lr",
    "schedule": "learning-rate schedule after warmup: cosine, wsd (warmup-stable-decay) or constant",
    "warmup": "warmup: a fraction of the steps (< 1) or a number of steps",
    "decay_fraction": "wsd: share of the steps spent decaying",
    "weight_decay": "AdamW weight decay",
    "beta1": "AdamW beta1",
    "beta2": "AdamW beta2",
    "eps": "AdamW epsilon",
    "grad_clip": "max global gradient norm; 0 disables clipping",
    "device": "what the run trains on: auto (the GPUs where there are any), cpu, gpu or cuda (Lightning's "
              "accelerator; how many: --devices)",
    "devices": "devices per node, or 'auto'",
    "num_nodes": "nodes (hosts) of a multi-node run",
    "parallelism": "how several devices share the model: auto (single device, or FSDP2 on several), single, ddp or "
    "fsdp (was --strategy, which composer search uses for its algorithm)",
    "precision": "auto (default): bf16 on GPUs with bf16 and CPUs with native bf16 (AVX-512 BF16, AMX), else fp32; "
    "fp32, bf16 (autocast, fp32 weights), bf16-true (bf16 weights), or Lightning's 32-true, bf16-mixed, 16-mixed",
    "compile": "torch.compile the model",
    "activation_checkpointing": "recompute each layer's activations in the backward pass (less memory, more compute)",
    "val_interval": "optimizer steps between validations (default: a tenth of the run, at least 50 steps: 10 "
                    "validations on runs of 500 steps or more, fewer on shorter ones)",
    "val_batches": "micro-batches per validation during training (the loss curve; the final one reads them all)",
    "val_tokens": "tokens scored by the final validation (default: the whole held-out split)",
    "curve_points": "record a learning curve: about N validations spaced in log-steps (summary.json's curve; "
    "0: none)",
    "curve_tokens": "held-out tokens per curve point (default 8192; the final validation reads --val-tokens)",
    "log_interval": "optimizer steps between logged metrics",
    "progress": "print the run's step lines (default on)",
    "checkpoint_interval": "optimizer steps between checkpoints (default: 5 per run; the end always saves)",
    "keep_checkpoints": "newest checkpoints kept in --out",
    "throughput_only": "measure tokens/s and MFU only: no validation, no checkpoints, no exported weights "
    "(summary.json's val_loss is null)",
    "wandb": "auto: online with an API key, else offline; off disables W&B",
    "wandb_project": "W&B project",
    "run_name": "W&B run name (default: --out's directory name)",
    "seed": "training seed: initialisation and data order (never the validation split)",
    "out": "output directory: checkpoints, the model and summary.json (required)",
    "init_from": "start from this model (a Composer model directory or a transformers checkpoint): its widths, "
    "vocabulary, tokenizer and weights, mapped onto --arch as composer hybridize does (default: random init)",
    "teacher": "distil this model's next-token distribution (KL); see composer hybridize (default: none)",
    "distill_temperature": "temperature of the distillation KL (default 1)",
    "kl_weight": "with --teacher: loss = w * KL + (1 - w) * cross-entropy (default 1)",
    "hidden_weight": "with --teacher: add this times the per-layer MSE between residual streams",
    "freeze": "comma-separated groups not trained: mlp, embeddings, attention, norms (needs --init-from; "
    "default: none)",
    "supernet_keep": "composer hybridize --search-placement's supernet: keep this many random teacher attention layers "
    "per step (default: off)",
}
# parser types of the fields whose values have a range a plain int does not say
TYPES = {"seed": seed_number, "data_seed": seed_number}
# --precision is checked by TrainConfig (composer.precision.parse_precision: one line, every spelling listed)
CHOICES = {"parallelism": STRATEGIES, "device": DEVICES, "wandb": WANDB_MODES,
           "schedule": ("cosine", "wsd", "constant")}


def _scalar_type(annotation: str):
    """The parser type of a TrainConfig field annotation such as ``'int | None'``."""
    for name, kind in (("bool", bool), ("int | str", str), ("int", int), ("float", float)):
        if annotation.startswith(name):
            return kind
    return str


def help_text(field: dataclasses.Field) -> str:
    """``field``'s help with its default: the text's own where it names one (e.g. "default: the offline corpus"),
    else the dataclass default as "(default: X)"."""
    text = HELP.get(field.name, field.name.replace("_", " "))
    if "default" in text or "required" in text:
        return text
    value = field.default
    shown = ("on" if value else "off") if isinstance(value, bool) else "none" if value is None else f"{value:g}" \
        if isinstance(value, float) else value
    return f"{text} (default: {shown})".replace("%", "%%")


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
    parser.add_argument("--from-search", metavar="DIR",
                        help="train a finished composer search's answer (DIR is its --out): best.json's recommended "
                        "pattern grown to --target by the search's --attention-at-target rule, at the rate the "
                        "search chose for it unless --lr is given")
    parser.add_argument("--target", metavar="PRESET",
                        help="with --from-search (required there): the preset the search's answer grows to, its size "
                        "and widths (e.g. llama-3.2-1b; composer presets lists them)")
    old_spelling(parser, "--depth", parser.add_argument(
        "--depth-at-target", dest="depth", metavar="N|FAMILY", type=layers_or_family,
        help="grow --arch PATTERN to --preset's size (or the --from-search answer to --target's) at exactly N layers "
        "(or a family's own depth there, e.g. nemotron-h) by width: d_model, heads and the MLP's width scaled "
        "together (composer extrapolate --depth-at-target shows the model first)"))
    old_spelling(parser, "--attention", parser.add_argument(
        "--attention-at-target", dest="attention", choices=("repeat", "keep"),
        help="with --depth-at-target: how the pattern's attention layers grow (repeat, the default; keep: as many "
        "as the pattern has, at the middles); --from-search takes the search's rule"))
    add_equal_cost_flags(parser)
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = TYPES.get(field.name) or _scalar_type(str(field.type))
        kwargs = {"dest": field.name, "default": None, "help": help_text(field)}
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            parser.add_argument(flag, type=kind, choices=CHOICES.get(field.name), **kwargs)
    for old, new in RENAMED.items():
        parser.add_argument("--" + old, dest=new, action=RenamedFlag, choices=CHOICES.get(new),
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace, notes: list[str] | None = None) -> TrainConfig:
    """The run's config; ``notes`` collects the lines that say how it was set up where a choice was not the user's
    (printed when training starts, so that bad input still ends in one line)."""
    notes = [] if notes is None else notes
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
    # the recipe's own values are kept: --from-search says which of its settings it honours or refuses
    args.recipe_values = TrainConfig.recipe_values(args.recipe) if args.recipe else {}
    config = TrainConfig(**{**args.recipe_values, **{k: v for k, v in given.items() if v is not None}})
    if getattr(args, "from_search", None):
        return from_search(config, args, notes.append)
    if getattr(args, "target", None) is not None:
        raise ConfigError(f"--target {args.target} is the size a --from-search answer grows to: give --from-search "
                          "DIR, or --preset for the widths --arch trains at")
    if getattr(args, "depth", None) is not None or getattr(args, "equal_cost", None) is not None:
        return at_depth(config, args, notes.append)
    if getattr(args, "attention", None) is not None:
        raise ConfigError("--attention-at-target says how a pattern grows: give it with --depth-at-target N (or use "
                          "--from-search)")
    if config.preset is None and config.init_from is None and config.arch not in PRESETS:
        notes.append(default_preset_note(DEFAULT_PRESET, f"the widths of --arch {config.arch}"))
    return config


def at_depth(config: TrainConfig, args: argparse.Namespace, say) -> TrainConfig:
    """``config`` training ``--arch PATTERN`` grown to ``--preset``'s size at ``--depth-at-target`` layers, by width
    (``scaling.extrapolate.grow_to_depth``), or with ``--equal-cost`` to a family's cost (``scaling.equal_cost``):
    the preset becomes the scaled one (``demo-4m:d280``)."""
    from search.growth import depth_at_target, grow

    what = "--depth-at-target" if args.equal_cost is None else "--equal-cost"
    if config.preset is None or config.arch in PRESETS:
        raise ConfigError(f"{what} grows --arch PATTERN at --preset: give both (e.g. --arch SADDDD --preset demo-4m "
                          + ("--depth-at-target 16)" if args.equal_cost is None else "--equal-cost nemotron-h)"))
    rule = equal_cost_of(args)
    depth = None if args.depth is None else depth_at_target(args.depth, config.preset)
    grown = grow(config.arch, config.preset, None, args.attention or "repeat", depth, equal_cost=rule)
    model = grown.extrapolation
    if rule is not None:
        say(f"{rule.words()}: {config.arch} at {model.n_layers} layers, {compact_pattern(model.pattern)}, widths "
            f"d_model {model.arch.d_model} (preset {model.target}): {grown.how}")
    else:
        say(f"--depth-at-target {args.depth}: {config.arch} at {model.n_layers} layers, "
            f"{compact_pattern(model.pattern)}, widths d_model {model.arch.d_model} (preset {model.target}), "
            f"{grown.sizes()}")
    return dataclasses.replace(config, arch=model.pattern, preset=model.target)


def from_search(config: TrainConfig, args: argparse.Namespace, say) -> TrainConfig:
    """``config`` training the answer of the search in ``args.from_search`` (issue 49): the model the search scored
    and costed, grown to ``--preset`` by the search's own rule, at its rate unless ``--lr`` is given."""
    from search.growth import Growth
    from search.results import answer_of

    recipe = getattr(args, "recipe_values", None) or {}
    if args.arch is not None:
        raise ConfigError(f"--from-search trains the search's answer: drop --arch {args.arch}, or drop --from-search "
                          "to train that pattern")
    if recipe.get("arch") is not None:
        raise ConfigError(f"--from-search trains the search's answer, but the recipe {args.recipe} sets arch "
                          f"{recipe['arch']}: drop arch from the recipe, or drop --from-search to train it")
    target = target_of_search_run(args, config)
    answer = answer_of(args.from_search)
    asked = getattr(args, "attention", None)
    rule = asked or answer["attention_at_target"]
    growth = Growth.of_answer(answer, target, attention=rule, depth=getattr(args, "depth", None),
                              equal_cost=equal_cost_of(args, answer))
    grown = growth.grow(answer["pattern"], target, answer["known"])
    pattern, widths, how = grown.layout, grown.widths, grown.how
    rule_from = f"--attention-at-target {rule}" if asked else f"the search's --attention-at-target {rule}"
    name = f" ({answer['known']})" if answer["known"] else ""
    say(f"from search {answer['out']}: answer {answer['answer'] or '-'}, {answer['pattern']}{name}; at "
        f"{target}: {compact_pattern(pattern)}, {len(layers(pattern))} layers ({how}; {rule_from})")
    chosen = answer["lr"]
    where = f"the rate the search chose for {answer['pattern']}" + (f" at {answer['lr_at']}" if answer["lr_at"] else "")
    # an lr the user gave (the flag, else the recipe's) wins over the search's, and the note names which
    given = ("--lr", args.lr) if args.lr is not None else (f"the recipe's lr ({getattr(args, 'recipe', None)})",
                                                             recipe.get("lr"))
    if given[1] is not None:
        lr = config.lr
        say(f"lr {lr:g}: {given[0]}" + (f" ({where} was {chosen:g})" if chosen else ""))
    elif chosen:
        say(f"lr {chosen:g}: {where} (--lr overrides it)")
        lr = chosen
    else:
        say(f"lr {config.lr:g}: the search chose no rate (its {answer['evaluator']} evaluator has none); --lr sets one")
        lr = config.lr
    return dataclasses.replace(config, arch=pattern, preset=widths, lr=lr)


def target_of_search_run(args: argparse.Namespace, config: TrainConfig) -> str:
    """The preset a ``--from-search`` answer grows to: ``--target``, as on extrapolate, pipeline and transfer
    (docs/usage/vocabulary.md). ``--preset`` was its name here and still works, with a notice; ``--preset`` otherwise
    means the widths ``--arch`` trains at."""
    import sys

    if args.target is None and config.preset is not None:
        print("--preset with --from-search is now --target (the size the answer grows to); the old spelling will go",
              file=sys.stderr)
        return config.preset
    if args.preset is not None and args.preset != args.target:
        raise ConfigError(f"--target {args.target} and --preset {args.preset}: with --from-search the size the "
                          "answer grows to is --target alone; drop --preset")
    if args.target is None:
        raise ConfigError("--from-search needs --target, the size to train the search's answer at (e.g. --target "
                          "llama-3.2-1b; composer presets lists them)")
    return args.target


def refuse_nothing_to_resume(out: str) -> None:
    """``--resume`` with an ``out`` that holds no checkpoint is refused, naming the path: it trained from scratch, so
    a mistyped --out started a new run without a word (issue 69). Commands only: a pipeline's runs resume where
    they can."""
    from pathlib import Path

    from composer.training.checkpoint import latest_checkpoint

    if out and latest_checkpoint(Path(out) / "checkpoints") is None:  # no --out at all is refused by train's checks
        what = "does not exist" if not Path(out).exists() else "holds no checkpoint (checkpoints/step-*.ckpt)"
        raise ConfigError(f"--resume: --out {out} {what}, so there is nothing to resume: check the path, or drop "
                          "--resume to start a new run")


def run(args: argparse.Namespace) -> int:
    from composer.training.progress import Announce
    from composer.training.run import train

    notes: list[str] = []
    config = config_from_args(args, notes)
    if args.resume:
        refuse_nothing_to_resume(config.out)
    summary = train(config, resume=args.resume, callbacks=[Announce(notes)] if notes else ())
    if not is_main_process():
        return 0
    if args.json:
        print_json(summary)
    else:
        print_rows([*summary_rows(summary), ("summary", f"{config.out}/summary.json")])
    return 0


# how each figure of the summary is printed: counts with thousands separators, a loss to 4 decimals, a rate in whole
# tokens, MFU as a percentage (issue 69: "params 192896" stood beside "tokens_per_s 21,600.3443")
FORMATS = {"tokens": "{:,}", "val_loss": "{:.4f}", "val_ppl": "{:,.2f}", "val_tokens": "{:,}",
           "tokens_per_s": "{:,.0f}", "mfu": "{:.1%}", "wall_time_s": "{:,.1f}"}


def summary_rows(summary: dict) -> list[tuple[str, str]]:
    """``composer train``'s result as people read it (:data:`FORMATS`); the parameter count says why it can differ
    from ``composer info``'s for the same pattern and preset: the embedding is sized to the tokenizer, its ids
    padded to a multiple of 64 rows (``composer.training.run.model_vocab_size``), where info counts the preset's
    vocabulary."""
    from composer.cli.format import human

    pattern = summary.get("compact", summary.get("pattern"))
    rows = [("pattern", pattern)] if pattern else []
    if summary.get("params") is not None:
        params = f"{summary['params']:,} ({human(summary['params'])}"
        if summary.get("non_embedding_params") is not None:
            params += f"; {summary['non_embedding_params']:,} non-embedding"
        ids, rows_of_embedding = summary.get("tokenizer_vocab_size"), summary.get("vocab_size")
        if ids is not None and rows_of_embedding is not None and ids != rows_of_embedding:
            params += (f"; embedding {rows_of_embedding:,} rows = the tokenizer's {ids:,} ids padded to a multiple "
                       "of 64, where composer info counts the preset's vocabulary")
        rows.append(("params", params + ")"))
    for key, shown in FORMATS.items():
        if summary.get(key) is not None:
            rows.append((key, shown.format(summary[key])))
        if key == "val_tokens" and summary.get("val_fingerprint"):
            rows.append(("val_fingerprint", summary["val_fingerprint"]))
    if summary.get("wandb_run"):
        rows.append(("W&B run", summary["wandb_run"]))
    return rows
