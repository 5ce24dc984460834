"""A Composer model directory: ``model.safetensors``, ``config.json`` (the architecture) and the tokenizer's files.

``composer train`` writes one to ``<out>/model``, ``composer import`` from a transformers checkpoint, ``composer
hybridize`` for its student; ``composer export`` and ``composer eval`` read one. Written atomically; read with a
one-line error for every way it can be wrong.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_only

from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.files import read_json_file, read_safetensors, umask_permissions
from composer.model import ComposerModel


@rank_zero_only
def export_weights(
    state: dict[str, torch.Tensor], arch: ArchConfig, directory: str | Path, tokenizer=None
) -> Path:
    """Write ``model.safetensors`` and ``config.json`` (the architecture) atomically into ``directory``.

    With ``tokenizer`` (a tokenizer object of :mod:`composer.data.tokenizer`, or a spec as ``composer train
    --tokenizer`` takes it) its files are written beside the weights and config.json names it, so the
    directory alone is enough to generate with (:func:`composer.data.tokenizer.load_tokenizer_for`).
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {"arch": arch.to_dict()}
    if tokenizer is not None:
        from composer.data.tokenizer import save_model_tokenizer

        config.update(save_model_tokenizer(tokenizer, directory, arch.max_seq_len, warn=_warn))
    tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in state.items()}
    tmp_weights, tmp_config = directory / ".model.safetensors.tmp", directory / ".config.json.tmp"
    save_file(tensors, str(tmp_weights), metadata={"format": "pt", "pattern": arch.pattern})
    umask_permissions(tmp_weights)  # safetensors writes it 0600
    tmp_config.write_text(json.dumps(config, indent=2))
    os.replace(tmp_weights, directory / "model.safetensors")
    os.replace(tmp_config, directory / "config.json")
    return directory


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def load_pretrained(directory: str | Path, device: str | torch.device = "cpu") -> ComposerModel:
    """Load a model exported by :func:`export_weights` (``composer train`` writes one to ``<out>/model``).

    Only the weights: its tokenizer (saved beside them since tokenizers travel with the model; older
    directories have none) comes from :func:`composer.data.tokenizer.load_tokenizer_for`."""
    directory = Path(directory)
    config_path, weights_path = directory / "config.json", directory / "model.safetensors"
    if not (config_path.is_file() and weights_path.is_file()):
        raise ConfigError(
            f"{str(directory)!r} is not an exported model; expected config.json and model.safetensors in it"
        )
    arch = read_arch(config_path)
    state = read_safetensors(weights_path, device=str(device))
    with torch.device(device):
        model = ComposerModel(arch)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:  # names or shapes that are not this architecture's: say which, in one line
        first = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
        raise ConfigError(f"{str(weights_path)!r} does not hold the weights of the architecture in "
                          f"{str(config_path)!r} ({first}); re-export the model") from None
    return model.eval()


def read_arch(config_path: Path) -> ArchConfig:
    """The architecture of a Composer model directory's ``config.json``, or one line saying what is wrong."""
    data = read_json_file(config_path, "a Composer model config")
    if isinstance(data, dict) and "train" in data and "plan" in data:  # composer train's <out>/config.json
        raise ConfigError(f"{str(config_path.parent)!r} is a composer train run's --out, not a model directory: pass "
                          "its model/ folder, which the run writes when its training finishes")
    if not isinstance(data, dict) or not isinstance(data.get("arch"), dict):
        raise ConfigError(f"{str(config_path)!r} has no 'arch' entry: not a Composer model directory (import a "
                          "transformers checkpoint with composer import first)")
    try:
        return ArchConfig.from_dict(data["arch"])
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{str(config_path)!r} has a damaged 'arch' entry ({type(err).__name__}: {err}); "
                          "re-export the model") from None
