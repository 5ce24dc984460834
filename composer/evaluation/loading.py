"""What an evaluation reads from a ``composer train`` run: the model directory, its tokenizer, the context it was
trained at, and the held-out text of its data split.

Why a module of its own: :mod:`composer.evaluation.downstream` imports lm-evaluation-harness when it is imported,
and the measures that need no harness (:mod:`composer.evaluation.context_recall`) must load a model without it.

Held-out text must be text the model never trained on. ``composer train`` holds out documents by a hash of the
document index and ``--data-seed`` (never the training seed; :mod:`composer.data.holdout`), so the same
``DataConfig`` fields give back exactly its validation split. They are read from the run's ``config.json`` beside
``model/``; a model directory without its run falls back to ``composer train``'s defaults, which the report says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from composer.errors import ConfigError

# composer train's --val-fraction and --data-seed defaults (composer.training.config.TrainConfig; a sibling layer,
# so not imported here; tests check the two agree). At a larger fraction the hash holds out a superset of the
# documents, so the fallback is held out for every run at 0.02 or above with data seed 0.
TRAIN_VAL_FRACTION = 0.02
TRAIN_DATA_SEED = 0


# -- the model -----------------------------------------------------------------------------------------------
def check_model_dir(directory: Path) -> None:
    """A one-line error unless ``directory`` looks like a model that composer train exported."""
    if not directory.is_dir():
        raise ConfigError(f"model directory {str(directory)!r} does not exist")
    if not (directory / "model.safetensors").is_file() and (directory / "model" / "model.safetensors").is_file():
        raise ConfigError(f"{str(directory)!r} is a run directory: pass the model/ folder inside it")
    if (directory / "config.json").is_file():  # damaged files: one line now, before minutes of loading
        from composer.files import check_safetensors
        from composer.interop.model_dir import read_arch

        read_arch(directory / "config.json")
        check_safetensors(directory / "model.safetensors")


def load_model(directory: str | Path, device: str | torch.device = "cpu") -> Any:
    """The model ``composer train`` exported to ``directory`` (``<out>/model``), in eval mode."""
    from composer.interop.model_dir import load_pretrained

    directory = Path(directory)
    check_model_dir(directory)
    return load_pretrained(directory, device=device)


def find_model_tokenizer(model_dir: Path) -> tuple[str, str]:
    """The tokenizer spec recorded with the model, and where it was read (``find_tokenizer``)."""
    from composer.interop.export import find_tokenizer

    spec, source = find_tokenizer(model_dir)
    if spec is None:
        raise ConfigError(
            f"no tokenizer is recorded with {str(model_dir)!r} (no tokenizer files in it and no summary.json "
            "beside it): pass --tokenizer (e.g. bytes, or the name or directory composer train was given)"
        )
    return spec, source


# -- the run beside it ---------------------------------------------------------------------------------------
def run_config(model_dir: Path) -> dict[str, Any]:
    """The ``train`` block of the run's ``config.json`` beside ``model/`` (``{}`` when there is none or it cannot
    be read: a model directory moved away from its run, or one ``composer import`` wrote)."""
    path = Path(model_dir).parent / "config.json"
    try:
        train = json.loads(path.read_text()).get("train")
    except (OSError, ValueError, AttributeError):
        return {}
    return train if isinstance(train, dict) else {}


def trained_seq_len(model_dir: Path, arch_max_seq_len: int) -> tuple[int, str]:
    """The context the model was trained at, and where that was read.

    Not ``arch.max_seq_len``: composer train keeps a preset's (``demo-4m``: 2,048) when it trains shorter, and a
    model asked to use positions it never trained at says nothing about its recall."""
    seq_len = run_config(model_dir).get("seq_len")
    if isinstance(seq_len, int) and seq_len > 0:
        return seq_len, "the run's config.json"
    return int(arch_max_seq_len), "the model's max_seq_len (no run config.json beside it)"


def held_out_config(
    model_dir: Path,
    tokenizer: str,
    data: str | None = None,
    data_seed: int | None = None,
) -> tuple[Any, str]:
    """The ``DataConfig`` whose validation split is the model's held-out text, and where it came from.

    ``data``/``data_seed`` override the run's; another source than the run's keeps none of the run's reading
    options (text field, document cap, cache), since they belong to its source.
    """
    from composer.data import DataConfig

    run = run_config(model_dir)
    same_source = data is None or (run and data == run.get("data"))
    source = run.get("data") if data is None else data
    fields: dict[str, Any] = {
        "source": source,
        "tokenizer": tokenizer,
        "split_seed": data_seed if data_seed is not None else run.get("data_seed", TRAIN_DATA_SEED),
        "val_fraction": run.get("val_fraction", TRAIN_VAL_FRACTION),
    }
    if same_source:
        for name, key in (("text_field", "text_field"), ("max_documents", "max_documents"),
                          ("cache_dir", "data_cache")):
            if run.get(key) is not None:
                fields[name] = run[key]
    origin = "the run's data split" if run and same_source and data_seed in (None, run.get("data_seed")) else (
        "composer train's default split" if not run else "a split other than the run's")
    return DataConfig(**fields), origin


def held_out_tokens(config: Any) -> np.ndarray:
    """The validation split of ``config`` as one token array (documents in order, EOS between them); the token
    cache is built on first use, as ``composer train`` builds it."""
    from composer.data import DataPipeline

    return DataPipeline(config).val_dataset(1).tokens.array


class HeldOutCache:
    """Held-out token arrays and tokenizers read once and reused: a search scores every seed of every candidate
    on the same split with the same tokenizer, and reading the split again per model would cost more than the
    measurement on small models."""

    def __init__(self) -> None:
        self._tokens: dict[str, np.ndarray] = {}
        self._tokenizers: dict[str, Any] = {}

    def tokenizer(self, spec: str) -> Any:
        from composer.data import load_tokenizer

        if spec not in self._tokenizers:
            self._tokenizers[spec] = load_tokenizer(spec)
        return self._tokenizers[spec]

    def tokens(self, config: Any) -> np.ndarray:
        key = repr(config)
        if key not in self._tokens:
            self._tokens[key] = held_out_tokens(config)
        return self._tokens[key]


__all__ = ["TRAIN_DATA_SEED", "TRAIN_VAL_FRACTION", "HeldOutCache", "check_model_dir",
           "find_model_tokenizer", "held_out_config", "held_out_tokens", "load_model", "run_config",
           "trained_seq_len"]
