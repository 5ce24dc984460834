"""A pattern in the notations of the engines people scale hybrids on: Megatron-LM, Hugging Face, fla.

A winner found here is trained at scale elsewhere; these writers carry its layer layout (and its widths) across
without hand transcription, and refuse, naming the layer, what the target cannot express:

* ``megatron``: Megatron-LM's ``--hybrid-override-pattern`` (``megatron/core/ssm/mamba_hybrid_layer_allocation``):
  one character per layer, ``M`` Mamba-2, ``*`` self-attention, ``-`` MLP, ``E`` MoE, exactly this grammar's
  one-symbol layers. Megatron has no Gated DeltaNet or per-layer sliding-window layer in that pattern.
* ``hf``: Hugging Face's ``layer_types``, one entry per decoder layer, where a decoder layer is a mixer followed by
  an FFN: ``full_attention`` and ``linear_attention`` (Qwen3-Next's names; Gated DeltaNet is its linear
  attention), ``sliding_attention`` (Gemma 3's) and ``mamba`` (Granite 4.0's and Falcon-H1's). MoE FFNs are the
  default there, so dense ones are listed in ``mlp_only_layers`` (Qwen-MoE's convention).
* ``fla``: flash-linear-attention's hybrid config, a linear-attention model (``gated_deltanet``) whose layers at
  ``attn["layers"]`` are softmax attention instead (every fla layer is mixer + MLP). One ``attn`` block holds one
  window, and fla's Mamba-2 model takes no ``attn`` layers.
"""

from __future__ import annotations

from typing import Any

from composer.config import ArchConfig
from composer.errors import ConfigError

FORMATS = ("megatron", "hf", "fla")
MIXERS = "AWSD"  # the symbols that mix tokens; M and E are FFNs
FFNS = "ME"
_MEGATRON = {"S": "M", "A": "*", "M": "-", "E": "E"}
_HF_MIXER = {"A": "full_attention", "W": "sliding_attention", "D": "linear_attention", "S": "mamba"}


def _refuse(fmt: str, arch: ArchConfig, index: int, why: str) -> ConfigError:
    symbol = arch.layers[index]
    return ConfigError(f"--format {fmt} cannot express layer {index} ({symbol}) of {arch.compact!r}: {why}")


def _refuse_parallel(arch: ArchConfig, fmt: str) -> None:
    for i, token in enumerate(arch.layers):
        if token.startswith("["):
            raise _refuse(fmt, arch, i, f"{fmt} has no parallel (hybrid-head) layer; its branches would have to "
                                        "become separate layers, which is a different architecture")


def decoder_layers(arch: ArchConfig, fmt: str) -> list[tuple[str, str]]:
    """The pattern as (mixer, FFN) pairs, the unit of a Hugging Face or fla decoder layer."""
    _refuse_parallel(arch, fmt)
    pattern = arch.pattern
    for i, symbol in enumerate(pattern):
        if i % 2 == 0 and symbol not in MIXERS:
            raise _refuse(fmt, arch, i, f"a decoder layer starts with a mixer ({', '.join(MIXERS)}), and here an "
                                        "FFN follows an FFN or starts the stack")
        if i % 2 == 1 and symbol not in FFNS:
            raise _refuse(fmt, arch, i, "a decoder layer is one mixer followed by one FFN (M or E), and here a "
                                        "mixer follows a mixer")
    if len(pattern) % 2:
        raise _refuse(fmt, arch, len(pattern) - 1, "the last mixer has no FFN after it")
    return [(pattern[i], pattern[i + 1]) for i in range(0, len(pattern), 2)]


def to_megatron(arch: ArchConfig) -> dict[str, Any]:
    """``--hybrid-override-pattern`` and the Megatron-LM arguments that give this architecture's widths."""
    _refuse_parallel(arch, "megatron")
    for i, symbol in enumerate(arch.pattern):
        if symbol not in _MEGATRON:
            raise _refuse("megatron", arch, i, "Megatron-LM's hybrid pattern has Mamba-2 (M), attention (*), MLP "
                                               "(-) and MoE (E) layers only")
    configs = arch.primitive_configs()
    args: dict[str, Any] = {
        "num-layers": arch.n_layers, "hybrid-override-pattern": "".join(_MEGATRON[s] for s in arch.pattern),
        "hidden-size": arch.d_model, "ffn-hidden-size": arch.ffn_dim, "num-attention-heads": arch.n_heads,
        "group-query-attention": True, "num-query-groups": arch.n_kv_heads, "kv-channels": arch.head_dim,
        "normalization": "RMSNorm", "norm-epsilon": arch.norm_eps, "swiglu": True, "disable-bias-linear": True,
        "position-embedding-type": "rope", "rotary-base": arch.rope_theta, "seq-length": arch.max_seq_len,
        "untie-embeddings-and-output-weights": not arch.tie_embeddings,
    }
    if "S" in configs:
        mamba = configs["S"]
        args.update({"mamba-state-dim": mamba.d_state, "mamba-head-dim": mamba.head_dim,
                     "mamba-num-groups": mamba.n_groups})
    if "E" in configs:
        moe = configs["E"]
        args.update({"num-experts": moe.n_experts, "moe-router-topk": moe.top_k,
                     "moe-ffn-hidden-size": moe.expert_ffn_dim, "moe-aux-loss-coeff": moe.aux_loss_coef})
    return {"format": "megatron", "hybrid_override_pattern": args["hybrid-override-pattern"], "args": args}


def to_hf(arch: ArchConfig) -> dict[str, Any]:
    """``layer_types`` (one mixer name per decoder layer) with the config fields that go with it."""
    layers = decoder_layers(arch, "hf")
    config: dict[str, Any] = {"num_hidden_layers": len(layers),
                              "layer_types": [_HF_MIXER[mixer] for mixer, _ in layers]}
    if any(ffn == "E" for _, ffn in layers):
        config["mlp_only_layers"] = [i for i, (_, ffn) in enumerate(layers) if ffn == "M"]
    if "W" in arch.pattern:
        config["sliding_window"] = arch.primitive_configs()["W"].window
    return {"format": "hf", **config}


def to_fla(arch: ArchConfig) -> dict[str, Any]:
    """An fla ``GatedDeltaNetConfig`` whose ``attn`` block turns the listed layers into softmax attention."""
    layers = decoder_layers(arch, "fla")
    for i, symbol in enumerate(arch.pattern):
        if symbol == "S":
            raise _refuse("fla", arch, i, "fla's hybrid attn block belongs to its linear-attention models, and its "
                                          "Mamba-2 model takes none: use --format megatron or hf")
        if symbol == "E":
            raise _refuse("fla", arch, i, "fla's models have dense MLPs only: use --format megatron or hf")
    attention = [i for i, (mixer, _) in enumerate(layers) if mixer in "AW"]
    kinds = {mixer for mixer, _ in layers if mixer in "AW"}
    if len(kinds) > 1:
        first_w = 2 * next(i for i, (mixer, _) in enumerate(layers) if mixer == "W")
        raise _refuse("fla", arch, first_w, "fla's one attn block has one window, so full (A) and sliding-window (W) "
                                            "attention cannot both appear")
    config: dict[str, Any] = {"model_type": "gated_deltanet", "hidden_size": arch.d_model,
                              "num_hidden_layers": len(layers), "intermediate_size": arch.ffn_dim,
                              "vocab_size": arch.vocab_size, "tie_word_embeddings": arch.tie_embeddings,
                              "norm_eps": arch.norm_eps, "max_position_embeddings": arch.max_seq_len}
    if "D" in arch.pattern:
        deltanet = arch.primitive_configs()["D"]
        config.update({"num_heads": deltanet.n_heads, "head_dim": deltanet.head_dim, "expand_v": deltanet.expand_v,
                       "conv_size": deltanet.conv_size, "use_short_conv": deltanet.use_short_conv,
                       "allow_neg_eigval": deltanet.allow_neg_eigval})
    if attention:
        window = arch.primitive_configs()["W"].window if "W" in kinds else None
        config["attn"] = {"layers": attention, "num_heads": arch.n_heads, "num_kv_heads": arch.n_kv_heads,
                          "window_size": window, "rope_theta": arch.rope_theta}
    return {"format": "fla", **config}


WRITERS = {"megatron": to_megatron, "hf": to_hf, "fla": to_fla}


def convert(arch: ArchConfig, fmt: str) -> dict[str, Any]:
    """``arch`` in notation ``fmt`` (one of :data:`FORMATS`); a ConfigError names the layer it cannot express."""
    if fmt not in WRITERS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return WRITERS[fmt](arch)


def format_text(converted: dict[str, Any]) -> str:
    """The converted architecture as a user pastes it: Megatron-LM flags, or the config fields as JSON."""
    import json

    if converted["format"] == "megatron":
        flags = []
        for key, value in converted["args"].items():
            if value is True:
                flags.append(f"--{key}")
            elif value is not False:
                flags.append(f"--{key} {value!r}" if key == "hybrid-override-pattern" else f"--{key} {value}")
        return " \\\n    ".join(flags)
    return json.dumps({k: v for k, v in converted.items() if k != "format"}, indent=2)
