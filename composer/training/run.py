"""Trainer factory and the ``composer train`` job: config -> Lightning Trainer + module + data -> summary.json.

Layout of a run directory ``<out>``::

    config.json          the resolved TrainConfig and architecture
    checkpoints/         step-XXXXXXXX.ckpt (atomic; --resume continues from the newest)
    logs/version_N/      CSV metrics (always; one version per start or resume)
    wandb/               the W&B run (unless --wandb off; offline without an API key)
    model/               model.safetensors + config.json (composer.interop.model_dir.load_pretrained) + the tokenizer
    summary.json         val_loss, tokens, tokens_per_s, params, mfu (where the peak is known), ...
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy
from lightning.pytorch.utilities.exceptions import SIGTERMException

from composer.accounting import analyze
from composer.config import ArchConfig
from composer.errors import ComposerRunError, ConfigError
from composer.files import atomic_write_json
from composer.interop.model_dir import export_weights
from composer.precision import device_has_native_bf16, resolve_device
from composer.presets import resolve_architecture
from composer.training.checkpoint import (
    AtomicCheckpoint,
    full_state_dict,
    latest_checkpoint,
    resumable_checkpoint,
)
from composer.training.config import DEFAULT_PRESET, TrainConfig, show_library_output, wandb_mode, wandb_settings
from composer.training.curve import ValidationCurve, log_spaced_steps
from composer.training.memory import check_training_memory, training_memory
from composer.training.module import ComposerLM, HybridizeConfig, OptimConfig, ParallelConfig
from composer.training.progress import progress_callback
from composer.training.runlock import is_first_process, run_lock
from composer.training.schedule import ScheduleConfig
from composer.training.stability import StabilityMonitor
from composer.training.throughput import ThroughputMonitor, peak_memory_bytes

# Lightning's start-up chatter that says nothing about this run.
for _pattern in (".*LeafSpec.*", ".*does not have many workers.*"):
    warnings.filterwarnings("ignore", message=_pattern)
logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
    lambda record: "litlogger" not in record.getMessage()
)
VOCAB_MULTIPLE = 64


@dataclass(frozen=True)
class RunPlan:
    """How a token budget and a global batch map onto devices and steps."""

    world_size: int
    micro_batch_size: int
    accumulate: int
    steps: int
    tokens_per_step: int
    warmup_steps: int
    val_interval: int
    checkpoint_interval: int

    @property
    def tokens(self) -> int:
        return self.steps * self.tokens_per_step


def world_size_of(config: TrainConfig) -> int:
    devices = config.devices
    if devices in ("auto", -1, "-1"):
        cuda = config.device in ("auto", "gpu", "cuda") and torch.cuda.is_available()
        devices = torch.cuda.device_count() if cuda else 1
    try:
        devices = int(devices)
    except (TypeError, ValueError):
        raise ConfigError(f"devices must be a number or 'auto', got {config.devices!r}") from None
    if devices < 1:
        raise ConfigError(f"devices must be at least 1, got {devices}")
    return devices * config.num_nodes


def plan_run(config: TrainConfig, world_size: int) -> RunPlan:
    if config.batch_size % world_size:
        raise ConfigError(
            f"batch_size {config.batch_size} is not divisible by the {world_size} devices; "
            f"use a multiple of {world_size}"
        )
    micro = config.micro_batch_size or config.batch_size // world_size
    if config.batch_size % (micro * world_size):
        raise ConfigError(
            f"batch_size {config.batch_size} must be a multiple of micro_batch_size x devices "
            f"({micro} x {world_size})"
        )
    tokens_per_step = config.batch_size * config.seq_len
    steps = config.tokens // tokens_per_step
    if steps < 1:
        raise ConfigError(
            f"tokens {config.tokens:,} is less than one step of batch_size x seq_len = {tokens_per_step:,}; "
            "raise --tokens or lower --batch-size / --seq-len"
        )
    warmup = round(config.warmup * steps) if config.warmup < 1 else int(config.warmup)
    return RunPlan(
        world_size=world_size,
        micro_batch_size=micro,
        accumulate=config.batch_size // (micro * world_size),
        steps=steps,
        tokens_per_step=tokens_per_step,
        warmup_steps=min(warmup, steps),
        # ~10 validations per run, but not more often than every 50 steps (the end always validates)
        val_interval=config.val_interval or min(steps, max(steps // 10, 50)),
        checkpoint_interval=config.checkpoint_interval or max(1, math.ceil(steps / 5)),
    )


def resolve_precision(config: TrainConfig) -> str:
    """``auto``: bf16-mixed where the device computes bf16 natively (see :mod:`composer.precision`), else fp32."""
    if config.precision != "auto":
        return config.precision
    cuda = config.device in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return "bf16-mixed" if device_has_native_bf16("cuda" if cuda else "cpu") else "32-true"


def resolve_strategy(config: TrainConfig, world_size: int):
    name = config.parallelism
    if name == "auto":
        name = "fsdp" if world_size > 1 else "single"
    if name == "single":
        if world_size > 1:
            raise ConfigError(f"parallelism 'single' runs on one device, but {world_size} were requested")
        return name, "auto"
    if name == "ddp":
        return name, DDPStrategy()
    return name, ModelParallelStrategy(data_parallel_size=world_size, tensor_parallel_size=1)


def quiet_lightning() -> None:
    """Lightning's start-up and end lines ("GPU available: False, used: False", "`Trainer.fit` stopped: `max_steps=1`
    reached.") off the terminal unless ``COMPOSER_VERBOSE=1`` (:func:`~composer.training.config.show_library_output`):
    they repeat what the run's own lines say. Its warnings still show."""
    level = logging.INFO if show_library_output() else logging.WARNING
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(level)


def build_loggers(config: TrainConfig, out: Path, arch: ArchConfig, plan: RunPlan) -> list[Logger]:
    # a new logs/version_N per start, so a resumed run never overwrites the metrics of the run it continues
    loggers: list[Logger] = [CSVLogger(out, name="logs")]
    mode = wandb_mode(config.wandb)
    if mode != "off":
        wandb_logger = WandbLogger(
            project=config.wandb_project,
            name=config.run_name or out.name,
            save_dir=str(out),
            offline=mode == "offline",
            # explicit: Lightning's offline flag only sets WANDB_MODE, which wandb ignores once an earlier
            # wandb.init in this process (a search's trials) has set it up, and it then asks for an API key
            mode=mode,
            config={**config.to_dict(), "pattern": arch.pattern, "plan": plan.__dict__},
            settings=wandb_settings(),  # silent: the run says where its W&B run is (summary's wandb_run)
        )
        # Lightning (2.6) passes anonymous=None, which W&B (0.19 on) answers with a deprecation warning on every run
        getattr(wandb_logger, "_wandb_init", {}).pop("anonymous", None)
        loggers.append(wandb_logger)
    return loggers


def model_vocab_size(tokenizer_vocab: int) -> int:
    """Embedding rows for a tokenizer: rounded up to a multiple of 64 (faster matmuls; unused rows are inert)."""
    return math.ceil(tokenizer_vocab / VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def run_architecture(config: TrainConfig, tokenizer_vocab: int | None) -> tuple[ArchConfig, str]:
    """The architecture a run from scratch trains and the preset of its widths: ``--arch`` at ``--preset``'s
    widths, ``--options`` merged over the preset's, ``max_seq_len`` at least ``seq_len``, and the embedding rows for
    a tokenizer of ``tokenizer_vocab`` ids (:func:`model_vocab_size`; the preset's own with None). Every layer's
    config is built, so that a bad option is one line before anything starts (issue 69)."""
    arch, widths = resolve_architecture(config.arch, config.preset, DEFAULT_PRESET)
    arch = arch.replace(max_seq_len=max(arch.max_seq_len, config.seq_len))
    if config.options:
        merged = {symbol: {**arch.options.get(symbol, {}), **values} for symbol, values in config.options.items()}
        arch = arch.replace(options={**arch.options, **merged})
    if tokenizer_vocab is not None and model_vocab_size(tokenizer_vocab) != arch.vocab_size:
        arch = arch.replace(vocab_size=model_vocab_size(tokenizer_vocab))
    arch.primitive_configs()
    return arch, widths


def data_config(config: TrainConfig):
    """The run's :class:`~composer.data.DataConfig` (its checks, e.g. ``val_fraction`` in [0, 1), run here)."""
    from composer.data import DataConfig

    return DataConfig(
        source=config.data,
        tokenizer=config.tokenizer,
        text_field=config.text_field,
        seq_len=config.seq_len,
        val_fraction=config.val_fraction,
        seed=config.seed,  # training order only
        split_seed=config.data_seed,  # the held-out documents: the same for every training seed
        val_sequences=None if config.val_tokens is None else math.ceil(config.val_tokens / config.seq_len),
        cache_dir=config.data_cache,
        num_workers=config.num_workers,
        max_documents=config.max_documents,
        repeat_share=config.repeat_share,
        repeat_span=config.repeat_span,
    )


def build(config: TrainConfig, save_on_sigterm: bool = True,
          callbacks: Sequence[L.Callback] = ()) -> tuple[L.Trainer, ComposerLM, Any, dict[str, Any]]:
    """The trainer factory: a configured Trainer, LightningModule and DataModule for ``config``
    (``save_on_sigterm``: see :func:`train`)."""
    from composer.data import TokenDataModule, load_tokenizer

    if config.out is None:
        raise ConfigError("an output directory is required: pass --out DIR")
    out = Path(config.out)
    if config.init_from is not None:  # the widths, vocabulary and tokenizer are the initial model's
        arch, widths, tokenizer = _hybrid_architecture(config)
    else:
        tokenizer = load_tokenizer(config.tokenizer)
        arch, widths = run_architecture(config, tokenizer.vocab_size)
    world_size = world_size_of(config)
    plan = plan_run(config, world_size)
    precision = resolve_precision(config)
    quiet_lightning()
    strategy_name, strategy = resolve_strategy(config, world_size)

    L.seed_everything(config.seed, workers=True, verbose=False)
    fsdp_bf16 = strategy_name == "fsdp" and precision == "bf16-mixed"
    module = ComposerLM(
        arch,
        OptimConfig(
            lr=config.lr,
            weight_decay=config.weight_decay,
            betas=(config.beta1, config.beta2),
            eps=config.eps,
            grad_clip=config.grad_clip,
            schedule=ScheduleConfig(
                name=config.schedule,
                warmup_steps=plan.warmup_steps,
                total_steps=plan.steps,
                min_lr_ratio=config.min_lr_ratio,
                decay_fraction=config.decay_fraction,
            ),
        ),
        ParallelConfig(
            fsdp=strategy_name == "fsdp",
            # FSDP2 does bf16 itself (bf16 all-gathers and compute, fp32 master weights and reductions)
            fsdp_param_dtype=torch.bfloat16 if fsdp_bf16 else None,
            compile=config.compile,
            activation_checkpointing=config.activation_checkpointing,
        ),
        HybridizeConfig(
            init_from=config.init_from,
            freeze=tuple(config.freeze or ()),
            teacher=config.teacher,
            temperature=config.distill_temperature,
            kl_weight=config.kl_weight,
            hidden_weight=config.hidden_weight,
            supernet_keep=config.supernet_keep,
            seed=config.seed,
        ),
    )
    datamodule = TokenDataModule(data_config(config), micro_batch_size=plan.micro_batch_size)
    stats = analyze(arch, seq_len=config.seq_len)
    throughput = ThroughputMonitor(plan.tokens_per_step, stats.flops_per_token, precision)
    progress = [progress_callback(config.log_interval)] if config.progress else []
    curve = ValidationCurve(log_spaced_steps(plan.steps, config.curve_points, first=plan.warmup_steps),
                            batches=math.ceil(config.curve_tokens / (config.seq_len * plan.micro_batch_size)),
                            tokens_per_step=plan.tokens_per_step)
    stability = StabilityMonitor(arch.vocab_size)
    checkpointing = [] if config.throughput_only else [
        AtomicCheckpoint(out / "checkpoints", plan.checkpoint_interval, config.keep_checkpoints, save_on_sigterm)]
    trainer = L.Trainer(
        accelerator=config.device,
        devices=config.devices,
        num_nodes=config.num_nodes,
        strategy=strategy,
        precision="32-true" if fsdp_bf16 else precision,
        max_steps=plan.steps,
        accumulate_grad_batches=plan.accumulate,
        val_check_interval=plan.val_interval * plan.accumulate,
        check_val_every_n_epoch=None,
        limit_val_batches=0 if config.throughput_only else config.val_batches,
        num_sanity_val_steps=0,
        log_every_n_steps=config.log_interval,
        logger=build_loggers(config, out, arch, plan),
        callbacks=[
            throughput,
            stability,
            curve,
            *checkpointing,
            *progress,
            *callbacks,
        ],
        enable_checkpointing=False,  # AtomicCheckpoint replaces ModelCheckpoint
        enable_progress_bar=any(isinstance(callback, ProgressBar) for callback in progress),
        enable_model_summary=False,
        default_root_dir=out,
        use_distributed_sampler=False,  # the datamodule shards by rank itself
    )
    context = {
        "arch": arch,
        "widths": widths,
        "plan": plan,
        "precision": precision,
        "compile": config.compile,
        "strategy": strategy_name,
        "stats": stats,
        "throughput": throughput,
        "stability": stability,
        "curve": curve,
        "tokenizer": tokenizer.name,
        "tokenizer_object": tokenizer,  # saved with the exported model
        "seed": config.seed,
        "data_seed": config.data_seed,
    }
    return trainer, module, datamodule, context


def composer_model_dir(path: str, imported: Path) -> str:
    """``path`` itself when it is a Composer model directory; a transformers checkpoint is imported once into
    ``imported`` (``composer import``) and that is used instead, so ``--init-from`` and ``--from`` take either."""
    from composer.interop.hf_import import import_hf, is_transformers_checkpoint

    if not is_transformers_checkpoint(path):
        return path
    if not (imported / "model.safetensors").is_file():
        print(f"importing the transformers checkpoint {path} into {imported}", file=sys.stderr)
        import_hf(path, imported, force=True)
    return str(imported)


def _hybrid_architecture(config: TrainConfig):
    """The student of a run that starts from ``init_from``: ``config.arch`` as a pattern over that model's widths
    (composer.hybridize.student.student_arch), with its tokenizer unless ``config.tokenizer`` names one."""
    from composer.data import load_tokenizer
    from composer.data.tokenizer import find_tokenizer
    from composer.hybridize.student import student_arch, teacher_arch

    config.init_from = composer_model_dir(config.init_from, Path(config.out) / "imported")
    if config.teacher is not None:
        config.teacher = composer_model_dir(config.teacher, Path(config.out) / "imported")
    base = teacher_arch(config.init_from)
    if config.teacher is not None and teacher_arch(config.teacher).vocab_size != base.vocab_size:
        raise ConfigError("the teacher and init_from models have different vocabularies: distil from the model "
                          "the student starts from, or one with the same tokenizer")
    arch = student_arch(base, config.arch, config.options)
    if config.supernet_keep is not None:
        from composer.hybridize.supernet import check_supernet_pattern

        check_supernet_pattern(base, arch.pattern, config.supernet_keep)
    arch = arch.replace(max_seq_len=max(arch.max_seq_len, config.seq_len))
    spec = config.tokenizer or find_tokenizer(config.init_from)[0] or "bytes"
    tokenizer = load_tokenizer(spec)
    if tokenizer.vocab_size > arch.vocab_size:
        raise ConfigError(f"tokenizer {tokenizer.name!r} has {tokenizer.vocab_size:,} ids but {config.init_from!r} "
                          f"only {arch.vocab_size:,}: pass the tokenizer the model was trained with")
    return arch, f"from {config.init_from}", tokenizer


def preflight(config: TrainConfig) -> None:
    """Every check of ``config`` that needs no training, before :func:`train` makes ``--out``, writes config.json or
    starts Lightning and W&B (issue 61: a bad --arch, --preset, --tokens or --tokenizer left an empty --out, and data
    without its text field printed Lightning's start-up lines and left config.json; issue 69: a device this machine
    lacks, a misspelt --options key, --val-fraction 1.5, a file or read-only --out, a model too large for memory):
    --out, the device, the architecture (or the model a hybrid starts from and the pattern over it), the plan (at
    least one optimizer step), the devices and parallelism, the data settings, the data and the tokenizer, and the
    memory the run needs against what the device has free. Each is a one-line usage error; none trains, and only a
    small local source is tokenised, to count its tokens (``composer.data.checks.check_enough_text``)."""
    from composer.data.checks import check_data
    from composer.data.sources import check_source
    from composer.files import check_output_dir
    from composer.hybridize.student import teacher_arch
    from composer.interop.hf_import import is_transformers_checkpoint

    if not config.out:
        raise ConfigError("an output directory is required: pass --out DIR")
    check_output_dir(config.out)
    resolve_device(config.device)
    arch = teacher = None
    if config.init_from is None:
        run_architecture(config, None)
    elif not any(is_transformers_checkpoint(path) for path in (config.init_from, config.teacher) if path):
        # a Composer model: its widths, the pattern over it and its tokenizer (a transformers checkpoint is
        # imported into --out first, so it is checked when the run builds)
        arch = _hybrid_architecture(dataclasses.replace(config))[0]  # a copy: it resolves init_from in place
        teacher = teacher_arch(config.teacher) if config.teacher else None
    world_size = world_size_of(config)
    plan = plan_run(config, world_size)
    strategy = resolve_strategy(config, world_size)[0]
    data_config(config)
    if config.init_from is None:
        tokenizer = check_data(config.data, config.text_field, config.tokenizer, config.seq_len, config.max_documents)
        arch = run_architecture(config, tokenizer.vocab_size)[0]
    else:
        check_source(config.data, config.text_field)
    if arch is not None and is_first_process():  # the other ranks start once the first holds its memory
        memory = training_memory(arch, micro_batch_size=plan.micro_batch_size, seq_len=config.seq_len,
                                 precision=resolve_precision(config), shards=world_size if strategy == "fsdp" else 1,
                                 frozen=bool(config.freeze), teacher=teacher,
                                 activation_checkpointing=config.activation_checkpointing)
        processes = plan.world_size // config.num_nodes if resolve_device(config.device).type == "cpu" else 1
        check_training_memory(memory, config.device, processes, arch.compact)


def train(config: TrainConfig, resume: bool = False, save_on_sigterm: bool = True,
          callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    """Run ``config`` to the end and return (and write) the summary; one process per ``out`` at a time.
    ``callbacks``: Lightning callbacks of the caller's, beside the run's own (a search's progress, say).

    SIGTERM saves the step just finished and says to continue with ``--resume``; ``save_on_sigterm=False`` skips
    both, for a caller whose ``out`` is temporary and who says itself how to continue (``search.lm``). Either
    way a SIGTERM ends in ``SystemExit(143)``.
    """
    preflight(config)
    with run_lock(config.out, "composer train"):
        return _train(config, resume, save_on_sigterm, callbacks)


def _train(config: TrainConfig, resume: bool, save_on_sigterm: bool,
           callbacks: Sequence[L.Callback] = ()) -> dict[str, Any]:
    out = Path(config.out) if config.out else None
    checkpoint = latest_checkpoint(out / "checkpoints") if out else None
    if checkpoint is not None and not resume:
        raise ConfigError(
            f"{str(out)!r} already holds checkpoints; pass --resume to continue that run or choose another --out"
        )
    if checkpoint is not None:
        checkpoint = resumable_checkpoint(out / "checkpoints", warn=lambda line: print(line, file=sys.stderr))
    trainer, module, datamodule, context = build(config, save_on_sigterm, callbacks)
    out.mkdir(parents=True, exist_ok=True)
    arch, plan = context["arch"], context["plan"]
    if trainer.is_global_zero:
        (out / "config.json").write_text(
            json.dumps({"train": config.to_dict(), "arch": arch.to_dict(), "plan": plan.__dict__}, indent=2)
        )
    started = time.perf_counter()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(checkpoint) if resume and checkpoint else None)
    except SIGTERMException:  # Lightning exits 0 on SIGTERM; a scheduler must not read a preemption as success
        raise SystemExit(128 + signal.SIGTERM) from None
    train_loss = trainer.callback_metrics.get("train/loss")
    record = context["stability"].record
    if record.diverged_at is not None:  # nothing to validate: report the divergence, not a loss
        context["validation"] = datamodule.pipeline.validation_identity()
        summary = _summary(trainer, context, [], None, time.perf_counter() - started, out)
        _publish_summary(trainer, out, summary)
        raise ComposerRunError(
            f"training diverged at step {record.diverged_at} ({record.diverged_reason}) at lr {config.lr:g}; lower --lr, "
            f"raise --warmup or keep gradient clipping on; summary in {out / 'summary.json'}"
        )
    if config.throughput_only:  # speed only: no score, nothing saved
        context["validation"] = datamodule.pipeline.validation_identity()
        summary = {**_summary(trainer, context, [], train_loss, time.perf_counter() - started, out), "model_dir": None}
        _publish_summary(trainer, out, summary)
        return summary
    trainer.limit_val_batches = 1.0  # the final score reads the whole held-out split (or val_tokens of it)
    validation = trainer.validate(module, datamodule=datamodule, verbose=False)
    if not validation or "val/loss" not in validation[0]:
        # Resumed from a checkpoint written at the last step, Lightning can return from the first validate
        # without running it (seen when a run is killed between its last checkpoint and its summary).
        validation = trainer.validate(module, datamodule=datamodule, verbose=False)
    context["validation"] = datamodule.pipeline.validation_identity()
    state = full_state_dict(module.model)
    export_weights(state, arch, out / "model", tokenizer=context["tokenizer_object"])
    summary = _summary(trainer, context, validation, train_loss, time.perf_counter() - started, out)
    _publish_summary(trainer, out, summary)
    return summary


def _publish_summary(trainer, out: Path, summary: dict[str, Any]) -> None:
    """summary.json (written once, by rank 0) and the W&B run closed with it: every way a run ends does both. The
    summary says where the W&B run is (``wandb_run``), which W&B itself no longer prints."""
    summary["wandb_run"] = _wandb_run(trainer)
    if trainer.is_global_zero:
        atomic_write_json(out / "summary.json", summary)
    _finish_wandb(trainer, summary)


def _wandb_run(trainer) -> str | None:
    """Where this run's W&B run is: its folder, with how to upload it when it is offline, or its URL; None without
    one."""
    if not any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
        return None
    import wandb

    run = wandb.run
    if run is None:
        return None
    if run.settings.mode in ("offline", "dryrun"):
        folder = Path(run.dir).parent  # <out>/wandb/offline-run-*/files
        return f"{folder} (offline; `wandb sync {folder}` uploads it)"
    return run.url


def _finish_wandb(trainer, summary: dict[str, Any]) -> None:
    """Close this run's W&B run with the summary, so the next ``train`` in this process (the pipeline trains
    several models one after another) starts a run of its own instead of Lightning reusing this one."""
    if not any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
        return
    import wandb

    if wandb.run is not None:
        wandb.run.summary.update({k: v for k, v in summary.items() if isinstance(v, (int, float))})
        wandb.finish()


def _summary(trainer, context, validation, train_loss, wall_time, out: Path) -> dict[str, Any]:
    arch, plan, stats = context["arch"], context["plan"], context["stats"]
    val = validation[0] if validation else {}
    perf = context["throughput"].metrics(plan.world_size)
    summary = {
        "pattern": arch.pattern,
        "compact": arch.compact,
        "widths": context["widths"],
        "params": stats.params,
        "non_embedding_params": stats.non_embedding_params,
        "val_loss": float(val["val/loss"]) if "val/loss" in val else None,
        "val_ppl": float(val["val/ppl"]) if "val/ppl" in val else None,
        # what val_loss was measured on: equal fingerprints mean the same held-out text
        "val_tokens": int(val["val/tokens"]) if "val/tokens" in val else context["validation"]["val_tokens"],
        "val_sequences": context["validation"]["val_sequences"],
        "val_fingerprint": context["validation"]["val_fingerprint"],
        "seed": context["seed"],
        "data_seed": context["data_seed"],
        "train_loss": float(train_loss) if train_loss is not None else None,
        **context["stability"].record.summary(),
        "tokens": trainer.global_step * plan.tokens_per_step,
        "steps": trainer.global_step,
        "tokens_per_s": perf.get("tokens_per_s"),
        "tokens_per_s_per_device": perf.get("tokens_per_s_per_device"),
        "flops_per_token": stats.flops_per_token,
        "peak_memory_bytes": peak_memory_bytes(trainer.strategy.root_device),
        "world_size": plan.world_size,
        "strategy": context["strategy"],
        "param_share_per_rank": param_share_held(trainer.lightning_module.model),
        "precision": context["precision"],
        "compile": context["compile"],
        "tokenizer": context["tokenizer"],
        # the embedding's rows and the tokenizer's ids they hold (padded: model_vocab_size), which composer train
        # prints beside the parameter count, since composer info counts the preset's vocabulary
        "vocab_size": arch.vocab_size,
        "tokenizer_vocab_size": context["tokenizer_object"].vocab_size,
        "seq_len": stats.seq_len,
        "batch_size": plan.tokens_per_step // stats.seq_len,
        "wall_time_s": wall_time,
        "model_dir": str(out / "model"),
    }
    if "mfu" in perf:
        summary["mfu"] = perf["mfu"]
    if context["curve"].points:
        summary["curve"] = context["curve"].points
    module = trainer.lightning_module
    if module.hybridize.init_from is not None or module.teacher is not None:
        summary["hybridize"] = _hybridize_summary(module, val, stats)
    return summary


def param_share_held(model: torch.nn.Module) -> float:
    """The share of the model's parameters this rank holds: about 1/world size under FSDP (each rank keeps its shard
    of every parameter), 1.0 for one process or data parallelism (every rank a full copy). Recorded so a run shows
    that it sharded, not only that it was asked to."""
    from torch.distributed.tensor import DTensor

    held = total = 0
    for p in model.parameters():
        total += p.numel()
        held += p.to_local().numel() if isinstance(p, DTensor) else p.numel()
    return held / total if total else 1.0


def _hybridize_summary(module, val: dict[str, Any], stats) -> dict[str, Any]:
    """What the student inherited and how far it is from its teacher: KL, and cache and state against it."""
    h = module.hybridize
    record: dict[str, Any] = {"init_from": h.init_from, "teacher": h.teacher, "frozen": list(h.freeze),
                              "frozen_params": sum(p.numel() for p in module.model.parameters() if not p.requires_grad),
                              "init_notes": module.init_notes,
                              "val_kl": float(val["val/kl"]) if "val/kl" in val else None}
    if module.teacher is not None:
        teacher = analyze(module.teacher.arch, seq_len=stats.seq_len)
        record.update({
            "teacher_pattern": module.teacher.arch.compact,
            "kv_cache_bytes_per_token": stats.kv_cache_bytes_per_token,
            "teacher_kv_cache_bytes_per_token": teacher.kv_cache_bytes_per_token,
            "cache_bytes_per_sequence": stats.cache_bytes_per_sequence,
            "teacher_cache_bytes_per_sequence": teacher.cache_bytes_per_sequence,
            "state_bytes_per_sequence": stats.state_bytes_per_sequence,
            "teacher_state_bytes_per_sequence": teacher.state_bytes_per_sequence,
            "cache_ratio": stats.cache_bytes_per_sequence / max(1, teacher.cache_bytes_per_sequence),
        })
    return record
