"""``TrainConfig``: every knob of a training run, flat, so a YAML recipe and the CLI flags share one namespace.

Recipes (``recipes/train/*.yaml``) set any subset of these fields; command-line flags override the recipe.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from composer.errors import ConfigError
from composer.precision import parse_precision

STRATEGIES = ("auto", "single", "ddp", "fsdp")
WANDB_MODES = ("auto", "online", "offline", "off")
DEFAULT_PRESET = "tiny"  # the widths of a pattern `arch` without `preset` (composer train prints it)
# old spellings of renamed fields (recipe keys, flags, keyword arguments), accepted for a while with a notice.
# `strategy` was both the search's algorithm and training's FSDP/DDP (issue 49): the training one is `parallelism`;
# `accelerator` is `device`, as on every command (docs/usage/vocabulary.md).
RENAMED = {"strategy": "parallelism", "accelerator": "device"}
DEVICES = ("auto", "cpu", "gpu", "cuda", "mps")
LARGEST_SEED = 2**32 - 1  # numpy's and Lightning's seeding take 0 to this (Lightning replaced one outside with 0)
_noticed: set[str] = set()


def is_seed(value: Any) -> bool:
    """An integer from 0 to ``LARGEST_SEED``: a seed every command takes (a search given -1 died in numpy)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value <= LARGEST_SEED


def renamed_notice(old: str, new: str, flag: bool = False) -> None:
    """One line on stderr, once per process, that ``old`` is now ``new`` (``flag``: as command-line flags)."""
    dash = (lambda name: "--" + name.replace("_", "-")) if flag else (lambda name: name)
    line = f"{dash(old)} is now {dash(new)}; the old spelling will go"
    if line not in _noticed:
        _noticed.add(line)
        print(line, file=sys.stderr)


@dataclass
class TrainConfig:
    # what to train
    arch: str = "(AM)x2"  # a preset name or a pattern (widths from `preset`)
    preset: str | None = None  # widths for a pattern `arch` (default: DEFAULT_PRESET)
    # per-primitive options merged over the preset's, e.g. {"W": {"window": 1024}, "E": {"n_experts": 16}};
    # on the command line as JSON: --options '{"W": {"window": 1024}}'
    options: dict[str, dict[str, Any]] | None = None
    # data (see composer.data.DataConfig)
    data: str | None = None  # None: the offline default corpus
    tokenizer: str | None = None  # None: the offline byte-level tokenizer
    text_field: str = "text"
    val_fraction: float = 0.02  # of documents, for local sources (streamed ones hold out their first documents)
    # chooses the held-out documents; `seed` never does, so runs differing only in `seed` share their validation text
    data_seed: int = 0
    max_documents: int | None = None
    # a recall-bearing stream: this share of the training windows repeat a span of their own text later in the window
    # (composer/data/repeated_spans.py); repeat_span None: 64 bytes or 32 subword tokens. Validation stays plain text.
    repeat_share: float = 0.0
    repeat_span: int | None = None
    num_workers: int = 0
    data_cache: str | None = None
    # budget and batch
    tokens: int = 1_000_000  # training tokens (rounded down to whole optimizer steps)
    seq_len: int = 256
    batch_size: int = 16  # global batch, in sequences
    micro_batch_size: int | None = None  # per device and forward pass; default: batch_size / world size
    # optimiser
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    schedule: str = "cosine"  # cosine | wsd | constant
    warmup: float = 0.05  # < 1: fraction of the steps; >= 1: number of steps
    decay_fraction: float = 0.2  # wsd: share of the steps spent decaying
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    # hardware and parallelism
    device: str = "auto"  # what the run trains on: auto, cpu, gpu or cuda (Lightning's accelerator); was `accelerator`
    devices: int | str = 1
    num_nodes: int = 1
    parallelism: str = "auto"  # auto | single | ddp | fsdp (FSDP2 through ModelParallelStrategy); was `strategy`
    # auto: bf16-mixed where the GPU or CPU computes bf16 natively, else 32-true; any spelling of
    # composer.precision.parse_precision (fp32, bf16, bf16-true, ...), kept as Lightning's name
    precision: str = "auto"
    compile: bool = False
    activation_checkpointing: bool = False
    # evaluation, logging, checkpoints
    val_interval: int | None = None  # optimizer steps between validations; default: a tenth of the run, at least
    # 50 steps and at most the run (training.run.plan_run): 10 validations from 500 steps, fewer below
    val_batches: int = 50  # micro-batches per validation during training (per device): the loss curve
    # the final validation (summary.json's val_loss) scores the whole held-out split, or its first `val_tokens`
    val_tokens: int | None = None
    # a learning curve in summary.json: about this many validations spaced in log-steps from the end of warmup to
    # the last step, each over the first `curve_tokens` held-out tokens (composer/training/curve.py); 0: none
    curve_points: int = 0
    curve_tokens: int = 8_192
    log_interval: int = 10
    progress: bool = True  # print the run's step lines (a search prints its own for its candidates' runs)
    checkpoint_interval: int | None = None  # optimizer steps; default: 5 per run; the end always saves
    keep_checkpoints: int = 2
    # a run that measures speed only (benchmarks/gpu_check.sh's MFU runs): no validation, no checkpoint, no exported
    # weights. At 1B widths the final validation recompiles every layer under no_grad and the export writes GBs,
    # which outlasted the quick GPU check's share twice after the timed steps were done (docs/gpu.md)
    throughput_only: bool = False
    wandb: str = "auto"  # auto: online with an API key, else offline; off disables W&B
    wandb_project: str = "composer"
    run_name: str | None = None
    seed: int = 0
    out: str | None = None
    # hybridization (composer hybridize, composer/hybridize/student.py): start from a Composer model and distil it
    init_from: str | None = None  # a Composer model directory: its widths, vocabulary, tokenizer and weights
    teacher: str | None = None  # a Composer model directory whose next-token distribution the run distils
    distill_temperature: float = 1.0
    kl_weight: float = 1.0  # with a teacher: loss = kl_weight * KL + (1 - kl_weight) * cross-entropy
    hidden_weight: float = 0.0  # + hidden_weight * mean over layers of the MSE between residual streams
    freeze: str | list[str] | None = None  # parameter groups not trained: mlp, embeddings, attention, norms
    # composer hybridize --search: train a supernet whose every step keeps this many random teacher attention layers
    supernet_keep: int | None = None
    # the old spellings of `parallelism` and `device` (TrainConfig(strategy="fsdp"), a recipe's `strategy:`);
    # not fields
    strategy: dataclasses.InitVar[str | None] = None
    accelerator: dataclasses.InitVar[str | None] = None

    def __post_init__(self, strategy: str | None = None, accelerator: str | None = None) -> None:
        for old, value in (("strategy", strategy), ("accelerator", accelerator)):
            if value is None:
                continue
            new = RENAMED[old]
            renamed_notice(old, new)
            if getattr(self, new) not in ("auto", value):
                raise ConfigError(f"{old} is the old spelling of {new}: give one, not {old} {value!r} and {new} "
                                  f"{getattr(self, new)!r}")
            setattr(self, new, value)
        if self.wandb is False:  # YAML 1.1 reads a recipe's `wandb: off` as false: that is what the author meant
            self.wandb = "off"
        self.precision = parse_precision(self.precision, flag="precision")
        if isinstance(self.options, str):
            try:
                self.options = json.loads(self.options)
            except json.JSONDecodeError as err:
                raise ConfigError(f"options must be JSON such as '{{\"W\": {{\"window\": 1024}}}}': {err}") from None
        if self.options is not None and not (
            isinstance(self.options, dict) and all(isinstance(v, dict) for v in self.options.values())
        ):
            raise ConfigError(f"options must map a primitive symbol to its options, got {self.options!r}")
        checks = [
            (self.parallelism in STRATEGIES, f"parallelism must be one of {STRATEGIES}, got {self.parallelism!r}"),
            (self.wandb in WANDB_MODES, f"wandb must be one of {WANDB_MODES}, got {self.wandb!r}"),
            (self.tokens > 0, f"tokens must be positive, got {self.tokens}"),
            (self.seq_len > 0, f"seq_len must be positive, got {self.seq_len}"),
            (self.batch_size > 0, f"batch_size must be positive, got {self.batch_size}"),
            (self.lr > 0, f"lr must be positive, got {self.lr}"),
            (self.warmup >= 0, f"warmup must be >= 0, got {self.warmup}"),
            # < 1 is a fraction of the steps, >= 1 a number of them: 2.5 is neither (it was cut to 2 steps)
            (self.warmup < 1 or float(self.warmup).is_integer(), f"warmup must be a fraction of the steps below 1 "
             f"(e.g. 0.05) or a whole number of steps (e.g. 100), got {self.warmup}"),
            # None is the default interval; 0 was taken for it without a word
            (self.checkpoint_interval is None or self.checkpoint_interval >= 1, "checkpoint_interval must be a number "
             f"of optimizer steps, 1 or more (leave it out for 5 per run), got {self.checkpoint_interval}"),
            (self.val_interval is None or self.val_interval >= 1, "val_interval must be a number of optimizer steps, 1 "
             f"or more (leave it out for a tenth of the run), got {self.val_interval}"),
            (self.grad_clip >= 0, f"grad_clip must be >= 0, got {self.grad_clip}"),
            (self.num_nodes >= 1, f"num_nodes must be >= 1, got {self.num_nodes}"),
            (self.val_batches >= 1, f"val_batches must be >= 1, got {self.val_batches}"),
            (self.val_tokens is None or self.val_tokens >= 1,
             f"val_tokens must be a positive token count (or unset for the whole split), got {self.val_tokens}"),
            (self.curve_points >= 0, f"curve_points must be >= 0, got {self.curve_points}"),
            (self.curve_tokens >= 1, f"curve_tokens must be a positive token count, got {self.curve_tokens}"),
            (is_seed(self.seed) and is_seed(self.data_seed),
             f"seed and data_seed must be integers from 0 to {LARGEST_SEED}, got {self.seed}, {self.data_seed}"),
        ]
        if isinstance(self.freeze, str):
            self.freeze = [part.strip() for part in self.freeze.split(",") if part.strip()]
        checks += [
            (self.distill_temperature > 0, f"distill_temperature must be positive, got {self.distill_temperature}"),
            (self.device in DEVICES, f"device must be one of {', '.join(DEVICES)} (the GPUs a run uses: --devices "
                                     f"N, or CUDA_VISIBLE_DEVICES), got {self.device!r}"),
            (0.0 <= self.kl_weight <= 1.0, f"kl_weight must be in [0, 1], got {self.kl_weight}"),
            (self.hidden_weight >= 0, f"hidden_weight must be >= 0, got {self.hidden_weight}"),
            (self.init_from is not None or not self.freeze,
             "freeze needs init_from: freezing randomly initialised layers trains nothing useful"),
            (self.supernet_keep is None or (self.teacher is not None and self.init_from is not None),
             "supernet_keep needs a teacher and init_from (composer hybridize --search-placement sets both)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @classmethod
    def field_names(cls) -> list[str]:
        """The fields a recipe may set, with the old spellings still accepted (``RENAMED``) at the end."""
        return [f.name for f in dataclasses.fields(cls)] + list(RENAMED)

    @classmethod
    def recipe_values(cls, path: str | Path) -> dict[str, Any]:
        """A YAML recipe's values, its old spellings (``RENAMED``) under their new names."""
        values = load_recipe(path, cls.field_names(), cls)
        for old, new in RENAMED.items():
            if old in values:
                renamed_notice(old, new)
                values.setdefault(new, values.pop(old))
        return values

    @classmethod
    def from_recipe(cls, path: str | Path, **overrides: Any) -> TrainConfig:
        """Load a YAML recipe; ``overrides`` (e.g. CLI flags that were given) win over its values."""
        values = cls.recipe_values(path)
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_recipe(path: str | Path, allowed: list[str], types: Mapping[str, Any] | type | None = None) -> dict[str, Any]:
    """A YAML recipe's values, refused in one line where the file is missing or not a mapping, a key is not in
    ``allowed``, or a value does not have its key's type in ``types`` (:func:`check_types`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"recipe {str(path)!r} does not exist; pass the path of a YAML file (see recipes/)")
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"recipe {str(path)!r} is not valid YAML: {str(err).splitlines()[0]}") from err
    if not isinstance(values, dict):
        raise ConfigError(f"recipe {str(path)!r} must be a mapping of option: value")
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ConfigError(f"recipe {str(path)!r} has unknown option(s) {unknown}; valid: {', '.join(allowed)}")
    check_types(values, types or {}, f"recipe {str(path)!r}: ")
    return values


# a simple annotation's name -> the values it takes and how an error names them. A str takes a YAML boolean:
# YAML 1.1 reads `wandb: off` as false, which the config reads as meant
_KINDS = {"int": ((numbers.Integral,), "a whole number"), "float": ((numbers.Real,), "a number"),
          "str": ((str, bool), "text"), "bool": ((bool,), "true or false"), "None": ((type(None),), "null")}


def check_types(values: Mapping[str, Any], types: Mapping[str, Any] | type, where: str = "") -> None:
    """Refuse in one line a value whose key's annotation in ``types`` (a dataclass's fields', or key -> ``int``,
    ``'float | None'``) does not take it, naming the key, the value and what it takes (``tokens: lots`` was a raw
    TypeError from the config's checks). Keys with another annotation (a mapping, a list) are left to their config's
    own checks."""
    if dataclasses.is_dataclass(types):
        types = {field.name: field.type for field in dataclasses.fields(types)}
    for key, value in values.items():
        annotation = types.get(key)
        name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        kinds = [part.strip() for part in name.split("|")]
        if annotation is None or not set(kinds) <= set(_KINDS):
            continue
        if any(isinstance(value, _KINDS[kind][0]) and not (kind in ("int", "float") and isinstance(value, bool))
               for kind in kinds):
            continue
        expected = " or ".join(_KINDS[kind][1] for kind in kinds)
        raise ConfigError(f"{where}{key} is {value!r}, expected {expected}{_number_hint(value)}")


def _number_hint(value: Any) -> str:
    """YAML 1.1 reads ``3e-3`` and ``1e6`` (no decimal point) as text: say how to write the number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    if not isinstance(value, str) or not math.isfinite(number):
        return ""
    return f" (YAML reads {value} as text: write {int(number) if number.is_integer() else number!r})"


def apply_overrides(values: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Put command-line ``overrides`` over recipe ``values`` (in place); ``None`` means "not given".

    ``"section.option"`` keys go into that section's mapping (``"train.tokens"`` -> ``values["train"]["tokens"]``),
    so the pipeline and transfer recipes share one rule for which flag wins.
    """
    for key, value in overrides.items():
        if value is None:
            continue
        section, _, option = key.partition(".")
        if option:
            values.setdefault(section, {})[option] = value
        else:
            values[key] = value
    return values


def show_library_output() -> bool:
    """Whether Lightning's and W&B's own lines reach the terminal: with ``COMPOSER_VERBOSE=1`` only. Without it a
    run prints its own lines and says where its W&B run is written (issue 69: a 2-step ``train --from-search``
    printed 36 lines of Lightning's device lines, a W&B deprecation warning and a 25-line W&B summary)."""
    return os.environ.get("COMPOSER_VERBOSE", "").strip().lower() not in ("", "0", "false", "no", "off")


def wandb_settings() -> Any:
    """The ``wandb.Settings`` of a W&B run Composer starts: silent (no banner, no history or summary at the end)
    unless :func:`show_library_output`, or unless ``WANDB_SILENT`` is set, which then decides as W&B documents."""
    import wandb

    if show_library_output() or "WANDB_SILENT" in os.environ:
        return wandb.Settings()
    return wandb.Settings(silent=True)


def wandb_mode(requested: str) -> str:
    """``auto``: online when an API key is configured (env or ~/.netrc), else offline."""
    if requested != "auto":
        return requested
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return "offline"
    netrc = Path.home() / ".netrc"
    has_key = bool(os.environ.get("WANDB_API_KEY")) or (netrc.is_file() and "api.wandb.ai" in netrc.read_text())
    return "online" if has_key else "offline"
