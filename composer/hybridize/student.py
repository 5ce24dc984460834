"""Turn a pretrained Transformer into a hybrid: the student architecture and its initialisation from the teacher.

``composer hybridize --init-from DIR --arch P`` keeps the teacher's depth, widths, embeddings and FFN layers and
replaces some of its attention layers by other mixers (pattern ``P``: same length, the same FFN symbol at every FFN
position). What carries over, layer by layer (the weights are copied; everything not listed keeps its own
primitive's initialisation):

* ``A`` -> ``A``, any layer -> the same symbol: copied as it is (norms included).
* ``A`` -> ``W`` (sliding-window attention): copied exactly; ``W`` is ``A`` restricted to a window, the same
  parameters.
* ``A`` -> ``D`` (Gated DeltaNet), the linear-attention reading of the teacher's projections (as "The Mamba in the
  Llama", arXiv 2408.15237, does for its linear RNN, and Jet-Nemotron's PostNAS for its linear layers): the student
  ``D`` gets the teacher's head count and head size with ``expand_v = 1``, so ``q_proj`` is the teacher's query
  projection, ``k_proj`` and ``v_proj`` its key and value projections repeated over each GQA group (query head
  ``h`` reads key/value head ``h // group``, as the teacher's attention does), and ``o_proj`` its output
  projection. The short convolutions start as the identity (last tap 1), so at initialisation they pass the
  projections through; the decay, step and output gate start as ``D``'s own initialisation.
* ``A`` -> ``S`` (Mamba-2), the mapping of "The Mamba in the Llama": ``C`` from the queries, ``B`` from the keys,
  ``x`` from the values and ``out_proj`` from the output projection. For shapes to match, the student ``S`` gets one
  group per teacher head (``n_groups = n_heads``), ``d_state = head_dim``, ``head_dim = head_dim`` and ``expand =
  n_heads * head_dim / d_model`` (1 for every Llama); ``B`` and ``x`` are repeated over each GQA group. The
  convolution starts as the identity; the gate ``z``, ``dt``, ``A`` and ``D`` as Mamba-2's own initialisation.
* Any other change of mixer (a ``W`` teacher layer to ``S``, say) starts from the student primitive's own
  initialisation, and the notes say so.

Options given for ``S`` or ``D`` (``--options``) win over the geometry above; the mapped weights then only carry over
where the shapes agree (otherwise that layer starts from its own initialisation, noted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.pattern import layers, parse_pattern

FFN_SYMBOLS = ("M", "E")
FREEZE_GROUPS = ("mlp", "embeddings", "attention", "norms")


def read_model(directory: str | Path) -> tuple[ArchConfig, dict[str, torch.Tensor]]:
    """A Composer model directory (``composer train``'s ``<out>/model`` or ``composer import``'s output)."""
    from composer.interop.export import read_model_dir

    return read_model_dir(directory)


def teacher_arch(directory: str | Path) -> ArchConfig:
    path = Path(directory) / "config.json"
    if not path.is_file():
        if (Path(directory) / "model" / "config.json").is_file():
            raise ConfigError(f"{str(directory)!r} is a run directory: pass the model/ folder inside it")
        raise ConfigError(f"{str(directory)!r} is not a Composer model directory (no config.json): train one with "
                          "composer train or import a transformers checkpoint with composer import")
    from composer.interop.model_dir import read_arch

    return read_arch(path)  # a transformers config, damaged JSON or a broken arch entry: one line each


def mapped_options(teacher: ArchConfig) -> dict[str, dict[str, Any]]:
    """The ``S`` and ``D`` geometry under which the teacher's attention projections map onto them exactly."""
    options: dict[str, dict[str, Any]] = {"D": {"n_heads": teacher.n_heads, "head_dim": teacher.head_dim,
                                               "expand_v": 1.0}}
    width = teacher.n_heads * teacher.head_dim
    if width % teacher.d_model == 0:
        options["S"] = {"expand": width // teacher.d_model, "head_dim": teacher.head_dim,
                        "n_groups": teacher.n_heads, "d_state": teacher.head_dim}
    return options


def student_arch(teacher: ArchConfig, pattern: str, options: dict[str, dict[str, Any]] | None = None) -> ArchConfig:
    """The hybrid of ``teacher`` with layer pattern ``pattern``: same depth, widths and FFN layers."""
    pattern = parse_pattern(pattern)
    ours, theirs = layers(pattern), teacher.layers
    if len(ours) != len(theirs):
        raise ConfigError(f"the pattern has {len(ours)} layers but the teacher {len(theirs)}: hybridize keeps the "
                          f"depth, so write one token per teacher layer ({teacher.compact})")
    for i, (new, old) in enumerate(zip(ours, theirs, strict=True)):
        if (new in FFN_SYMBOLS or old in FFN_SYMBOLS) and new != old:
            raise ConfigError(f"layer {i} is {old} in the teacher but {new} in the pattern: hybridize replaces mixers "
                              f"and keeps the FFN layers ({', '.join(FFN_SYMBOLS)}) where they are")
    merged = {symbol: dict(values) for symbol, values in mapped_options(teacher).items()}
    for symbol, values in {**teacher.options, **(options or {})}.items():
        merged[symbol] = {**merged.get(symbol, {}), **values}
    used = set("".join(ours).replace("[", "").replace("]", ""))
    return teacher.replace(pattern=pattern, options={s: v for s, v in merged.items() if s in used})


# -- initialisation ---------------------------------------------------------------------------------------------
def _per_query_head(weight: torch.Tensor, teacher: ArchConfig) -> torch.Tensor:
    """K or V rows ``[kv_heads * head_dim, d]`` repeated so that query head ``h`` gets kv head ``h // group``."""
    group = teacher.n_heads // teacher.n_kv_heads
    heads = weight.unflatten(0, (teacher.n_kv_heads, teacher.head_dim))
    return heads.repeat_interleave(group, dim=0).flatten(0, 1)


def _identity_conv(conv: torch.nn.Conv1d) -> None:
    conv.weight.zero_()
    conv.weight[:, :, -1] = 1.0
    if conv.bias is not None:
        conv.bias.zero_()


def _qkv(teacher: ArchConfig, state: dict[str, torch.Tensor], prefix: str):
    q_dim, kv_dim = teacher.n_heads * teacher.head_dim, teacher.n_kv_heads * teacher.head_dim
    q, k, v = state[prefix + "wqkv.weight"].split((q_dim, kv_dim, kv_dim), dim=0)
    return q, k, v, state[prefix + "wo.weight"]


def _assign(parameter: torch.Tensor, value: torch.Tensor) -> bool:
    if tuple(parameter.shape) != tuple(value.shape):
        return False
    parameter.copy_(value)
    return True


@torch.no_grad()
def init_student(model, teacher: ArchConfig, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy and map the teacher's weights into ``model`` (a ComposerModel of :func:`student_arch`); returns one
    note per layer that did not carry over exactly."""
    student: ArchConfig = model.arch
    notes = []
    own = model.state_dict()
    for name in ("tok_embeddings.weight", "norm.weight", "output.weight"):
        if name in own and name in state:
            own[name].copy_(state[name])
    for i, (new, old) in enumerate(zip(student.layers, teacher.layers, strict=True)):
        layer, prefix = model.layers[i], f"layers.{i}."
        layer.norm.weight.copy_(state[prefix + "norm.weight"])
        body = {n[len(prefix + "primitive."):]: t for n, t in state.items() if n.startswith(prefix + "primitive.")}
        primitive = layer.primitive
        if new == old or (old == "A" and new == "W"):
            primitive.load_state_dict(body)
            continue
        if old not in ("A", "W") or new not in ("D", "S"):
            notes.append(f"layer {i}: {old} -> {new} has no weight mapping; starts from {new}'s own initialisation")
            continue
        q, k, v, o = _qkv(teacher, state, prefix + "primitive.")
        k, v = _per_query_head(k, teacher), _per_query_head(v, teacher)
        if new == "D":
            ok = all(_assign(p.weight, w) for p, w in ((primitive.q_proj, q), (primitive.k_proj, k),
                                                        (primitive.v_proj, v), (primitive.o_proj, o)))
            for conv in (primitive.q_conv1d, primitive.k_conv1d, primitive.v_conv1d) if ok else ():
                _identity_conv(conv)
        else:
            c = primitive.config
            ok = c.d_inner == q.shape[0] and c.n_groups * c.d_state == q.shape[0]
            if ok:
                z, x, b, cc, dt = primitive.in_proj.weight.split(
                    [c.d_inner, c.d_inner, c.n_groups * c.d_state, c.n_groups * c.d_state, c.n_heads], dim=0)
                x.copy_(v), b.copy_(k), cc.copy_(q)
                ok = _assign(primitive.out_proj.weight, o)
                _identity_conv(primitive.conv1d)
        if not ok:
            notes.append(f"layer {i}: {old} -> {new}: the shapes set by its options differ from the teacher's "
                         "attention, so it starts from its own initialisation")
    return notes


def freeze(model, groups: list[str] | tuple[str, ...]) -> list[str]:
    """Stop gradients for parameter groups: ``mlp`` (FFN layers, M and E, with their norms), ``embeddings``
    (token embedding and LM head), ``attention`` (layers the student kept as ``A`` or ``W``) and ``norms`` (every
    RMSNorm). Returns the frozen parameter names."""
    unknown = sorted(set(groups) - set(FREEZE_GROUPS))
    if unknown:
        raise ConfigError(f"freeze names unknown group(s) {unknown}; choose from {', '.join(FREEZE_GROUPS)}")
    frozen = []
    layers = model.arch.layers
    for name, parameter in model.named_parameters():
        parts = name.split(".")
        token = layers[int(parts[1])] if parts[0] == "layers" else None
        is_norm = len(parts) > 1 and parts[-2].endswith("norm")
        hit = (("mlp" in groups and token in FFN_SYMBOLS)
               or ("embeddings" in groups and parts[0] in ("tok_embeddings", "output"))
               or ("attention" in groups and token in ("A", "W"))
               or ("norms" in groups and is_norm))
        if hit:
            parameter.requires_grad_(False)
            frozen.append(name)
    return frozen
