"""Export a model written by ``composer train`` to the Hugging Face transformers format.

Why: people serve and evaluate models with tools that read transformers checkpoints (``transformers``,
lm-evaluation-harness, vLLM, TGI, llama.cpp's converters), not Composer's own ``model/`` directory (a
``config.json`` holding the ``ArchConfig`` plus ``model.safetensors`` under Composer's parameter names). Two
routes, chosen by the pattern:

* **Llama** (``(AM)xN`` exactly, no options beyond an attention backend or an MLP width): a plain
  ``LlamaForCausalLM`` checkpoint that loads with no custom code. The layers are the same functions: the only
  change is splitting our fused projections, ``wqkv`` into ``q_proj``/``k_proj``/``v_proj`` and ``w13`` into
  ``gate_proj``/``up_proj``, and renaming (our rotary embedding already uses transformers' rotate-half
  layout, so q and k need no permutation; Llama-3 RoPE scaling becomes ``rope_scaling`` with
  ``rope_type: llama3``).
* **Any other pattern** (``S``, ``D``, ``W``, ``E`` layers, or an ``A``/``M`` pattern that is not strictly
  alternating): a remote-code model, loaded with ``trust_remote_code=True``. The export directory holds
  ``configuration_composer.py`` and ``modeling_composer.py`` (copied from :mod:`composer.interop.hf_remote`), named by
  ``config.json``'s ``auto_map``. The modeling file wraps :class:`~composer.model.ComposerModel` imported from
  this package rather than re-implementing six primitives, so **composer-hnas must be installed** wherever the
  export is loaded.

Tokenizer: the tokenizer the model was trained with is written beside the weights. A Hugging Face tokenizer is
re-saved with ``save_pretrained``; Composer's offline byte tokenizer (ids 0-255 are UTF-8 bytes, 256 is EOS)
becomes an equivalent ``tokenizer.json`` (byte-level BPE with no merges), so ``AutoTokenizer`` encodes text to
the same ids. The tokenizer is found from ``--tokenizer``, else the one ``composer train`` saved with the model
(named in ``model/config.json``, files beside the weights), else the ``summary.json``/``config.json`` that
``composer train`` writes next to ``model/`` (model directories from before tokenizers were saved with them);
the lookup and the writing are shared with ``composer train`` (:mod:`composer.data.tokenizer`).

The export is staged in a temporary directory beside ``OUT`` and moved into place when complete, so a failed
export leaves no half-written checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from composer.config import ArchConfig
from composer.data.tokenizer import (  # noqa: F401 - byte_tokenizer_fast and find_tokenizer are public here too
    BYTE_EOS_TOKEN,
    byte_tokenizer_fast,
    find_tokenizer,
    load_tokenizer,
    save_tokenizer_files,
)
from composer.errors import ComposerUsageError, ConfigError
from composer.files import read_safetensors, temporary_path

FORMATS = ("hf",)
INSTALL_HINT = "pip install 'composer-hnas[bench]' (or transformers>=4.45)"
# every file an export may write: --force removes the ones a previous export left and this one does not write
EXPORT_FILES = (
    "config.json", "generation_config.json", "model.safetensors", "configuration_composer.py",
    "modeling_composer.py", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "chat_template.jinja", "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
)


@dataclass
class ExportResult:
    out: Path
    kind: str  # "llama" (plain LlamaForCausalLM) or "remote-code" (trust_remote_code=True)
    pattern: str
    files: list[str]
    tokenizer: str | None  # what was written, in words; None when no tokenizer files were written
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "kind": self.kind, "pattern": self.pattern, "files": self.files,
                "tokenizer": self.tokenizer, "notes": self.notes,
                "load": load_snippet(self.out, self.kind)}


def load_snippet(out: Path, kind: str) -> str:
    remote = ", trust_remote_code=True" if kind == "remote-code" else ""
    return f"AutoModelForCausalLM.from_pretrained({str(out)!r}{remote})"


# -- reading a Composer model directory ---------------------------------------------------------------------
def read_model_dir(directory: str | Path) -> tuple[ArchConfig, dict[str, torch.Tensor]]:
    """The architecture and weights of a directory written by ``composer train`` (``<out>/model``)."""
    directory = Path(directory)
    if not directory.exists():
        raise ConfigError(f"model directory {str(directory)!r} does not exist")
    config_path, weights_path = directory / "config.json", directory / "model.safetensors"
    if not directory.is_dir() or not (config_path.is_file() and weights_path.is_file()):
        inside = (directory / "model" / "config.json").is_file()
        hint = " (pass the model/ folder inside it)" if inside else ""
        raise ConfigError(
            f"{str(directory)!r} is not a Composer model directory: expected config.json and "
            f"model.safetensors as written by composer train to <out>/model{hint}"
        )
    try:
        data = json.loads(config_path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {str(config_path)!r}: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("arch"), dict):
        raise ConfigError(
            f"{str(config_path)!r} has no 'arch' entry: not a Composer model (a transformers checkpoint is "
            "already in the format composer export writes)"
        )
    arch = ArchConfig.from_dict(data["arch"])
    state = read_safetensors(weights_path)
    _check_state(arch, state, weights_path)
    return arch, state


def _check_state(arch: ArchConfig, state: dict[str, torch.Tensor], path: Path) -> None:
    """The weights must be exactly those of ``arch`` (names and shapes), so a mismatch fails here, clearly."""
    from composer.model import build_model

    expected = {name: tuple(t.shape) for name, t in build_model(arch, device="meta").state_dict().items()}
    found = {name: tuple(t.shape) for name, t in state.items()}
    if expected != found:
        missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
        shapes = [n for n in set(expected) & set(found) if expected[n] != found[n]]
        detail = "; ".join(
            f"{label}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
            for label, names in (("missing", missing), ("unexpected", extra), ("wrong shape", sorted(shapes)))
            if names
        )
        raise ConfigError(f"{str(path)!r} does not match the architecture in config.json ({detail})")


# -- the Llama route ----------------------------------------------------------------------------------------
def is_llama(arch: ArchConfig) -> bool:
    """``(AM)xN``: attention then MLP, alternating, with options transformers' Llama can express."""
    n = len(arch.pattern) // 2
    if n == 0 or arch.pattern != "AM" * n:
        return False
    allowed = {"A": {"backend"}, "M": {"ffn_dim"}}
    return all(set(values) <= allowed.get(symbol, set()) for symbol, values in arch.options.items())


def llama_ffn_dim(arch: ArchConfig) -> int:
    return int(arch.options.get("M", {}).get("ffn_dim", arch.ffn_dim))


def llama_config_dict(arch: ArchConfig, dtype: torch.dtype, bos_id: int | None, eos_id: int | None) -> dict:
    """``config.json`` of the ``LlamaForCausalLM`` equivalent to ``arch``.

    Written in the long-standing key layout (``rope_theta`` plus ``rope_scaling`` with ``rope_type: llama3``,
    as Meta's Llama 3.x checkpoints have it), which transformers 4.45+ reads natively and 5.x converts to its
    ``rope_parameters``: the checkpoint does not depend on the transformers version that exported it.
    """
    rope_scaling = None
    if arch.rope_scaling is not None:
        s = arch.rope_scaling
        rope_scaling = {
            "rope_type": "llama3", "factor": float(s.factor), "low_freq_factor": float(s.low_freq_factor),
            "high_freq_factor": float(s.high_freq_factor),
            "original_max_position_embeddings": int(s.original_max_seq_len),
        }
    import transformers

    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": arch.vocab_size,
        "hidden_size": arch.d_model,
        "intermediate_size": llama_ffn_dim(arch),
        "num_hidden_layers": len(arch.pattern) // 2,
        "num_attention_heads": arch.n_heads,
        "num_key_value_heads": arch.n_kv_heads,
        "head_dim": arch.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": arch.max_seq_len,
        "initializer_range": arch.init_std,
        "rms_norm_eps": arch.norm_eps,
        "rope_theta": float(arch.rope_theta),
        "rope_scaling": rope_scaling,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "tie_word_embeddings": arch.tie_embeddings,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": None,
        "use_cache": True,
        "torch_dtype": _dtype_name(dtype),
        "transformers_version": transformers.__version__,
    }


def llama_state_dict(arch: ArchConfig, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Composer parameter names and fused projections -> transformers Llama names, split.

    The same mapping as ``benchmarks/train_step_throughput.py``'s ``copy_weights``. A tied model has no
    ``lm_head.weight`` (transformers ties it to ``model.embed_tokens.weight`` on load).
    """
    q_dim, kv_dim = arch.n_heads * arch.head_dim, arch.n_kv_heads * arch.head_dim
    out = {"model.embed_tokens.weight": state["tok_embeddings.weight"],
           "model.norm.weight": state["norm.weight"]}
    if not arch.tie_embeddings:
        out["lm_head.weight"] = state["output.weight"]
    for i in range(len(arch.pattern) // 2):
        attn, mlp, hf = f"layers.{2 * i}.", f"layers.{2 * i + 1}.", f"model.layers.{i}."
        q, k, v = state[attn + "primitive.wqkv.weight"].split((q_dim, kv_dim, kv_dim), dim=0)
        gate, up = state[mlp + "primitive.w13.weight"].chunk(2, dim=0)
        out.update({
            hf + "input_layernorm.weight": state[attn + "norm.weight"],
            hf + "self_attn.q_proj.weight": q,
            hf + "self_attn.k_proj.weight": k,
            hf + "self_attn.v_proj.weight": v,
            hf + "self_attn.o_proj.weight": state[attn + "primitive.wo.weight"],
            hf + "post_attention_layernorm.weight": state[mlp + "norm.weight"],
            hf + "mlp.gate_proj.weight": gate,
            hf + "mlp.up_proj.weight": up,
            hf + "mlp.down_proj.weight": state[mlp + "primitive.w2.weight"],
        })
    return {name: tensor.contiguous() for name, tensor in out.items()}


# -- the remote-code route ----------------------------------------------------------------------------------
def remote_config_dict(arch: ArchConfig, dtype: torch.dtype, bos_id: int | None, eos_id: int | None) -> dict:
    from composer.interop.hf_remote.configuration_composer import ComposerConfig

    config = ComposerConfig(arch=arch.to_dict(), bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=None)
    data = config.to_dict()
    data.update({
        "architectures": ["ComposerForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_composer.ComposerConfig",
            "AutoModelForCausalLM": "modeling_composer.ComposerForCausalLM",
        },
        "torch_dtype": _dtype_name(dtype),
    })
    data.pop("dtype", None)
    return data


# -- tokenizer ----------------------------------------------------------------------------------------------
# The byte tokenizer's tokenizer.json, the tokenizer lookup and the writing live in composer/data/tokenizer.py,
# shared with composer train (which saves the tokenizer beside the model it exports).
def save_tokenizer(spec: str, directory: Path, max_seq_len: int, vocab_size: int) -> dict[str, Any]:
    """Write tokenizer files for ``spec`` (as ``composer train --tokenizer`` takes it) into ``directory``.

    Returns ``description``, ``bos_id`` (``None`` when the tokenizer has none), ``eos_id`` and ``notes``.
    """
    tokenizer = load_tokenizer(spec)
    if tokenizer.vocab_size > vocab_size:
        raise ConfigError(
            f"tokenizer {tokenizer.name!r} has {tokenizer.vocab_size:,} ids but the model only "
            f"{vocab_size:,}: not the tokenizer it was trained with (pass the right one with --tokenizer)"
        )
    return save_tokenizer_files(tokenizer, directory, max_seq_len)


# -- the export ---------------------------------------------------------------------------------------------
def _require_transformers() -> None:
    try:
        import tokenizers
        import transformers

        del tokenizers, transformers  # only their presence is checked here
    except ImportError as err:
        raise ComposerUsageError(f"composer export needs transformers ({err}): {INSTALL_HINT}") from None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _check_out(out: Path, model_dir: Path, force: bool) -> None:
    if out.resolve() == model_dir.resolve():
        raise ConfigError("--out must be a new directory, not the model directory itself")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(
            f"--out {str(out)!r} exists and is not empty; pass --force to overwrite its export files"
        )


def export_hf(
    model_dir: str | Path,
    out: str | Path,
    *,
    tokenizer: str | None = None,
    force: bool = False,
) -> ExportResult:
    """Export the Composer model in ``model_dir`` as a transformers checkpoint in ``out`` (see module doc).

    ``tokenizer`` overrides the one recorded with the model (a name or path as ``composer train --tokenizer``
    takes, or ``"bytes"``). ``force`` allows a non-empty ``out``: the export's files replace those there and
    export files a previous export left behind (e.g. ``modeling_composer.py``) are removed; other files stay.
    """
    model_dir, out = Path(model_dir), Path(out)
    arch, state = read_model_dir(model_dir)
    _check_out(out, model_dir, force)
    _require_transformers()
    from safetensors.torch import save_file

    dtypes = {t.dtype for t in state.values()}
    dtype = dtypes.pop() if len(dtypes) == 1 else torch.float32
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = temporary_path(out)
    stage.mkdir()
    try:
        written = _write_tokenizer(stage, model_dir, tokenizer, arch)
        bos_id, eos_id, notes = written["bos_id"], written["eos_id"], written["notes"]
        if is_llama(arch):
            kind = "llama"
            config = llama_config_dict(arch, dtype, bos_id, eos_id)
            tensors = llama_state_dict(arch, state)
        else:
            from composer.interop.hf_remote import REMOTE_CODE_DIR, REMOTE_CODE_FILES

            kind = "remote-code"
            config = remote_config_dict(arch, dtype, bos_id, eos_id)
            tensors = {f"model.{name}": tensor.contiguous() for name, tensor in state.items()}
            for name in REMOTE_CODE_FILES:
                shutil.copyfile(REMOTE_CODE_DIR / name, stage / name)
            notes += [
                "remote code: load with trust_remote_code=True (AutoTokenizer too, under transformers 5); "
                "modeling_composer.py imports the composer-hnas package, which must be installed where the "
                "model is loaded",
                "generate() runs without a cache: each new token recomputes the whole prefix",
            ]
        save_file(tensors, str(stage / "model.safetensors"), metadata={"format": "pt"})
        (stage / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        generation = {"_from_model_config": True, "bos_token_id": bos_id, "eos_token_id": eos_id,
                      "transformers_version": config["transformers_version"]}
        if kind == "remote-code":
            generation["use_cache"] = False
        (stage / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
        files = sorted(p.name for p in stage.iterdir())
        _readable(stage)
        _install(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return ExportResult(out=out, kind=kind, pattern=arch.compact, files=files,
                        tokenizer=written["description"], notes=notes)


def _write_tokenizer(stage: Path, model_dir: Path, spec: str | None, arch: ArchConfig) -> dict[str, Any]:
    """Tokenizer files for ``spec``, else for the one found with the model; as :func:`save_tokenizer`."""
    source = "--tokenizer"
    if spec is None:
        spec, source = find_tokenizer(model_dir)
    if spec is None:
        return {"description": None, "bos_id": None, "eos_id": None,
                "notes": ["no tokenizer is recorded with this model, so none was written (pass --tokenizer)"]}
    written = save_tokenizer(spec, stage, arch.max_seq_len, arch.vocab_size)
    written["description"] += f", from {source}"
    return written


def _readable(stage: Path) -> None:
    """Ordinary permissions (0644 files under the usual umask): safetensors writes its file owner-only."""
    from composer.files import umask_permissions

    for path in stage.iterdir():
        umask_permissions(path)


def _install(stage: Path, out: Path) -> None:
    """Move the staged export into ``out``: a rename when ``out`` is absent or empty, else file by file."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.replace(stage, out)
        return
    written = {p.name for p in stage.iterdir()}
    for name in EXPORT_FILES:
        if name not in written and (out / name).is_file():
            (out / name).unlink()
    for name in written:
        os.replace(stage / name, out / name)


__all__ = ["FORMATS", "ExportResult", "byte_tokenizer_fast", "export_hf", "find_tokenizer", "is_llama",
           "llama_config_dict", "llama_state_dict", "read_model_dir", "save_tokenizer"]
