"""Import a pretrained transformers checkpoint of the Llama family as a Composer model (``composer import``).

Why: most people who want a hybrid hold a pretrained Transformer, not the budget to pretrain one. Hybridizing it
(``composer hybridize``, issue 18) starts from that model in Composer's own form: an ``(AM)xN`` pattern whose
``A`` layers are the checkpoint's attention and whose ``M`` layers its MLPs.

The mapping is the inverse of ``composer export``'s Llama route (``composer.interop.export.llama_state_dict``): the
layers compute the same functions, so only names change and two projections are fused (``q/k/v_proj`` into
``wqkv``, ``gate/up_proj`` into ``w13``). Composer's rotary embedding uses transformers' rotate-half layout, so
q and k need no permutation. The config is read from ``config.json`` directly, so the import itself needs neither
transformers nor the model's code; the weights from ``model.safetensors`` or a sharded
``model.safetensors.index.json``.

What is imported exactly:

* ``llama``: GQA, SwiGLU, RMSNorm, RoPE with ``rope_type`` ``default`` or ``llama3`` (Llama 3.1/3.2 scaling),
  tied or untied embeddings, any ``head_dim``.
* ``mistral``: as Llama; a ``sliding_window`` shorter than the context makes every attention layer a
  sliding-window layer (``(WM)xN`` with ``W``'s ``window`` set to it), which is what Mistral computes.

Refused with a line naming what is not supported: q/k/v or MLP biases (Qwen2 has q/k/v biases), q/k norms
(Qwen3), other RoPE scalings (linear, dynamic, yarn, longrope), activations other than SiLU, per-layer window
layouts (``layer_types``, Qwen2's ``max_window_layers``), and pickled ``pytorch_model.bin`` weights (convert them
to safetensors first).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.files import read_json_file, read_safetensors

SUPPORTED = ("llama", "mistral")
# the config fields an exact import cannot do without (the rest have transformers' defaults)
REQUIRED_CONFIG_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size")
# tokenizer files copied beside the weights when the checkpoint has them (composer.data.tokenizer finds them)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja")


@dataclass
class ImportResult:
    out: Path
    arch: ArchConfig
    source: str
    model_type: str
    tokenizer: list[str]  # tokenizer files copied
    notes: list[str] = field(default_factory=list)
    max_logit_difference: float | None = None  # with verify: against transformers, float32

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "source": self.source, "model_type": self.model_type,
                "pattern": self.arch.compact, "arch": self.arch.to_dict(), "tokenizer": self.tokenizer,
                "notes": self.notes, "max_logit_difference": self.max_logit_difference}


# -- config ---------------------------------------------------------------------------------------------------
def read_hf_config(directory: str | Path) -> dict[str, Any]:
    directory = Path(directory)
    path = directory / "config.json"
    if not path.is_file():
        raise ConfigError(f"{str(directory)!r} has no config.json: not a transformers checkpoint directory")
    config = read_json_file(path, "a transformers config")
    if not isinstance(config, dict):
        raise ConfigError(f"{str(path)!r} is damaged: it holds no JSON object; re-download it")
    if "arch" in config and "model_type" not in config:
        raise ConfigError(f"{str(directory)!r} is already a Composer model directory; no import needed")
    return config


def is_transformers_checkpoint(directory: str | Path) -> bool:
    """A directory with a transformers ``config.json`` (a ``model_type``, no Composer ``arch``)."""
    try:
        config = json.loads((Path(directory) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model_type" in config and "arch" not in config


def _refuse(model_type: str, what: str) -> ConfigError:
    return ConfigError(f"cannot import this {model_type} checkpoint exactly: {what}")


def _rope(config: dict[str, Any], model_type: str) -> tuple[float, dict[str, Any] | None]:
    """``(rope_theta, rope_scaling)`` from either key layout (``rope_scaling`` + ``rope_theta``, or transformers
    5's ``rope_parameters``)."""
    parameters = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    theta = float(parameters.get("rope_theta", config.get("rope_theta", 10_000.0)))
    merged = {**parameters, **scaling}
    rope_type = merged.get("rope_type", merged.get("type", "default"))
    if rope_type == "default":
        return theta, None
    if rope_type != "llama3":
        raise _refuse(model_type, f"RoPE scaling {rope_type!r} (only Llama 3's 'llama3' scaling is supported)")
    return theta, {"factor": float(merged["factor"]), "low_freq_factor": float(merged["low_freq_factor"]),
                   "high_freq_factor": float(merged["high_freq_factor"]),
                   "original_max_seq_len": int(merged["original_max_position_embeddings"])}


def arch_from_hf(config: dict[str, Any]) -> tuple[ArchConfig, list[str]]:
    """The Composer architecture equal to a transformers Llama-family config, and notes on what was mapped."""
    model_type = str(config.get("model_type", "unknown"))
    if model_type not in SUPPORTED:
        extra = {
            "qwen2": "its q/k/v projections have biases, which Composer's attention (A) does not have",
            "qwen3": "its attention normalises q and k per head (q_norm, k_norm), which A does not",
            "gemma": "its RMSNorm adds 1 to the weight and scales the embeddings",
        }.get(model_type, f"supported model types: {', '.join(SUPPORTED)}")
        raise _refuse(model_type, extra)
    if config.get("attention_bias") or config.get("mlp_bias"):
        raise _refuse(model_type, "attention or MLP biases (Composer's A and M have none)")
    if config.get("hidden_act", "silu") != "silu":
        raise _refuse(model_type, f"activation {config['hidden_act']!r} (M is SwiGLU, with SiLU)")
    if config.get("layer_types") and len(set(config["layer_types"])) > 1:
        raise _refuse(model_type, f"mixed per-layer attention types {sorted(set(config['layer_types']))}")
    missing = [key for key in REQUIRED_CONFIG_KEYS if config.get(key) is None]
    if missing:
        raise ConfigError(f"config.json of this {model_type} checkpoint lacks {', '.join(map(repr, missing))}: "
                          "it is incomplete or damaged; re-download it or save it again with save_pretrained")
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    layers = int(config["num_hidden_layers"])
    max_len = int(config.get("max_position_embeddings", 2048))
    theta, scaling = _rope(config, model_type)
    notes = []
    window = config.get("sliding_window")
    windowed = model_type == "mistral" and window is not None and int(window) < max_len
    options = {"W": {"window": int(window)}} if windowed else {}
    if windowed:
        notes.append(f"sliding window of {int(window)} tokens: every attention layer is W (window {int(window)})")
    arch = ArchConfig(
        pattern=("WM" if windowed else "AM") * layers, d_model=hidden, n_heads=heads, n_kv_heads=kv_heads,
        head_dim=head_dim, ffn_dim=int(config["intermediate_size"]), vocab_size=int(config["vocab_size"]),
        tie_embeddings=bool(config.get("tie_word_embeddings", False)), norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        rope_theta=theta, rope_scaling=scaling, max_seq_len=max_len,
        init_std=float(config.get("initializer_range", 0.02)), options=options,
    )
    return arch, notes


# -- weights --------------------------------------------------------------------------------------------------
def read_hf_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors checkpoint, single-file or sharded."""
    directory = Path(directory)
    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    if single.is_file():
        return read_safetensors(single)
    if index.is_file():
        weight_map = read_json_file(index, "a sharded checkpoint's index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConfigError(f"{str(index)!r} is damaged: it has no 'weight_map' naming the shards; re-download it")
        shards = sorted(set(weight_map.values()))
        missing = [shard for shard in shards if not (directory / shard).is_file()]
        if missing:
            raise ConfigError(f"{str(index)!r} names shard(s) missing from {str(directory)!r}: "
                              f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}; finish the download")
        state: dict[str, torch.Tensor] = {}
        for shard in shards:
            state.update(read_safetensors(directory / shard))
        return state
    if (directory / "pytorch_model.bin").is_file() or list(directory.glob("pytorch_model-*.bin")):
        raise ConfigError(f"{str(directory)!r} holds pickled pytorch_model.bin weights: save the model with "
                          "save_pretrained(..., safe_serialization=True) to get model.safetensors, then import")
    raise ConfigError(f"{str(directory)!r} has no model.safetensors (or sharded index): not a transformers checkpoint")


def state_from_hf(arch: ArchConfig, hf: dict[str, torch.Tensor], model_type: str = "llama") -> dict[str, torch.Tensor]:
    """transformers Llama names -> Composer names, q/k/v and gate/up fused (inverse of the export mapping)."""
    def take(name: str) -> torch.Tensor:
        if name not in hf:
            raise _refuse(model_type, f"the weights lack {name!r}")
        return hf.pop(name)

    # a bare LlamaModel (no LM head) saves its weights without the "model." prefix
    hf = {name if name.startswith(("model.", "lm_head.")) else f"model.{name}": t for name, t in hf.items()}
    out = {"tok_embeddings.weight": take("model.embed_tokens.weight"), "norm.weight": take("model.norm.weight")}
    head = hf.pop("lm_head.weight", None)
    if not arch.tie_embeddings:
        if head is None:
            raise _refuse(model_type, "tie_word_embeddings is false but there is no lm_head.weight")
        out["output.weight"] = head
    for i in range(arch.n_layers // 2):
        hf_layer, attn, mlp = f"model.layers.{i}.", f"layers.{2 * i}.", f"layers.{2 * i + 1}."
        out[attn + "norm.weight"] = take(hf_layer + "input_layernorm.weight")
        out[attn + "primitive.wqkv.weight"] = torch.cat(
            [take(hf_layer + f"self_attn.{p}_proj.weight") for p in ("q", "k", "v")], dim=0)
        out[attn + "primitive.wo.weight"] = take(hf_layer + "self_attn.o_proj.weight")
        out[mlp + "norm.weight"] = take(hf_layer + "post_attention_layernorm.weight")
        out[mlp + "primitive.w13.weight"] = torch.cat(
            [take(hf_layer + "mlp.gate_proj.weight"), take(hf_layer + "mlp.up_proj.weight")], dim=0)
        out[mlp + "primitive.w2.weight"] = take(hf_layer + "mlp.down_proj.weight")
    leftover = sorted(name for name in hf if "rotary_emb" not in name)
    if leftover:
        raise _refuse(model_type, f"weights with no Composer counterpart: {', '.join(leftover[:4])}"
                                  + (" ..." if len(leftover) > 4 else ""))
    return out


# -- the whole import -----------------------------------------------------------------------------------------
def import_hf(source: str | Path, out: str | Path, *, dtype: torch.dtype = torch.float32,
              verify: bool = False, force: bool = False) -> ImportResult:
    """Write ``source`` (a transformers checkpoint directory) as a Composer model directory ``out``."""
    from composer.interop.model_dir import export_weights
    from composer.model import build_model

    source, out = Path(source), Path(out)
    if not source.is_dir():
        raise ConfigError(f"{str(source)!r} is not a directory (a transformers checkpoint saved with save_pretrained)")
    if out.exists() and any(out.iterdir()) and not force:
        raise ConfigError(f"{str(out)!r} exists and is not empty: choose a new --out or pass --force")
    config = read_hf_config(source)
    arch, notes = arch_from_hf(config)
    state = {name: t.to(dtype) for name, t in state_from_hf(arch, read_hf_weights(source), config["model_type"]).items()}
    model = build_model(arch, device="meta")
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    wrong = sorted(n for n in expected if tuple(state[n].shape) != expected[n])
    if wrong:
        raise _refuse(config["model_type"], f"shapes differ from its config for {', '.join(wrong[:3])}")
    out.mkdir(parents=True, exist_ok=True)
    export_weights(state, arch, out)
    copied = []
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)
            copied.append(name)
    if not copied:
        notes.append("no tokenizer files in the checkpoint: pass --tokenizer to the commands that need one")
    result = ImportResult(out, arch, str(source), config["model_type"], copied, notes)
    if verify:
        result.max_logit_difference = compare_logits(source, out)
    return result


def compare_logits(source: str | Path, imported: str | Path, seq_len: int = 64, seed: int = 0) -> float:
    """Max |logit difference| between transformers' model of ``source`` and the imported Composer model, float32,
    on random token ids (needs transformers)."""
    try:
        from transformers import AutoModelForCausalLM
    except ImportError as err:
        raise ConfigError("--verify needs transformers: pip install 'composer-hnas[bench]'") from err
    from composer.interop.model_dir import load_pretrained

    ours = load_pretrained(imported).float()
    theirs = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32).eval()
    ids = torch.randint(0, ours.arch.vocab_size, (2, min(seq_len, ours.arch.max_seq_len)),
                        generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return (ours(ids).logits - theirs(input_ids=ids).logits).abs().max().item()
