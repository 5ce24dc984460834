"""Models the MAD tasks train: the candidate as a causal LM, inside MAD's compression auto-encoder, or behind the
recall probe's token-shift stem."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from composer.config import ArchConfig
from composer.loss import IGNORE_INDEX, cross_entropy
from composer.model import CausalLMOutput, ComposerModel


def sincos_positions(length: int, dim: int) -> torch.Tensor:
    """Fixed 1-D sine/cosine position embeddings ``[length, dim]`` (MAD's ``posemb_sincos_1d``)."""
    half = dim // 2
    omega = 1.0 / (10_000 ** (torch.arange(half, dtype=torch.float32) / max(half - 1, 1)))
    angles = torch.arange(length, dtype=torch.float32)[:, None] * omega[None, :]
    table = torch.cat([angles.sin(), angles.cos()], dim=1)
    return F.pad(table, (0, dim - 2 * half))


class CompressionAutoEncoder(nn.Module):
    """MAD's auto-encoder for the compression task, with the candidate's layers as the encoder.

    The encoder is a :class:`ComposerModel` (embedding, the pattern's pre-norm residual layers, final norm); only
    the last position's state (the compression token's, which has seen the whole sequence under the causal mask)
    is kept. A fixed, non-expanding MLP decoder (MAD's: norm, linear, GELU, norm, linear, GELU) reads that state
    plus a sine/cosine embedding of each position and predicts the token there through its own head (norm,
    linear with bias). Everything the candidate can learn about compressing sits in the encoder.
    """

    def __init__(self, arch: ArchConfig) -> None:
        super().__init__()
        self.arch = arch
        d = arch.d_model
        self.encoder = ComposerModel(arch)
        self.decoder = nn.Sequential(
            nn.RMSNorm(d, eps=arch.norm_eps),
            nn.Linear(d, d),
            nn.GELU(),
            nn.RMSNorm(d, eps=arch.norm_eps),
            nn.Linear(d, d),
            nn.GELU(),
        )
        self.unembed = nn.Sequential(nn.RMSNorm(d, eps=arch.norm_eps), nn.Linear(d, arch.vocab_size))
        self.register_buffer("positions", sincos_positions(arch.max_seq_len, d), persistent=False)
        for module in (*self.decoder, *self.unembed):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=arch.init_std)
                nn.init.zeros_(module.bias)

    def encode(self, input_ids: torch.Tensor) -> torch.Tensor:
        enc = self.encoder
        h = enc.tok_embeddings(input_ids)
        for layer in enc.layers:
            h = layer(h)
        return enc.norm(h)[:, -1]

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None) -> CausalLMOutput:
        code = self.encode(input_ids)
        x = code[:, None, :] + self.positions[: input_ids.shape[1]].to(code.dtype)
        logits = self.unembed(self.decoder(x))
        if targets is None:
            return CausalLMOutput(logits, None)
        lm_loss = cross_entropy(logits, targets, IGNORE_INDEX)
        aux_loss = self.encoder.collect_aux_loss()  # e.g. E's load balancing, which the encoder's layers set
        if aux_loss is None:
            aux_loss = lm_loss.new_zeros(())
        return CausalLMOutput(logits, lm_loss + aux_loss, lm_loss, aux_loss)

    def parameter_groups(self, weight_decay: float) -> list[dict]:
        """The encoder's own groups; the decoder's norms and biases are not decayed."""
        groups = self.encoder.parameter_groups(weight_decay)
        for name, param in [*self.decoder.named_parameters(), *self.unembed.named_parameters()]:
            no_decay = name.endswith("bias") or param.ndim == 1
            groups[1 if no_decay else 0]["params"].append(param)
        return groups


class ShiftStemLM(ComposerModel):
    """The pattern as a causal LM whose input also carries each token's predecessor: ``h_t = e(x_t) + W e(x_{t-1})``
    before the first layer (H3's shift, the short convolution Zoology and Based put in front of attention).

    Why, for the recall probe: a lookup needs each value to be marked with the key before it. Attention alone must
    first build that mark (a previous-token head feeding an induction head), and that, not what it can recall, is
    what a CPU budget measured: three attention layers without the stem were at 0.16 on 64 pairs after 12,000
    steps, and at 1.00 after 3,000 with it (docs/recall.md). Every pattern gets the same stem, so what still
    separates them is the state each keeps. ``W`` starts at the embedding's scale; the stem holds no state past
    the previous token. Training and scoring only: it has no cached decoding path.
    """

    def __init__(self, arch: ArchConfig) -> None:
        super().__init__(arch)
        self.shift = nn.Linear(arch.d_model, arch.d_model, bias=False)
        if not self.shift.weight.is_meta:
            nn.init.normal_(self.shift.weight, std=arch.init_std)

    def hidden_states(self, input_ids: torch.Tensor, cache=None) -> torch.Tensor:
        if cache is not None:
            raise NotImplementedError("ShiftStemLM is a probe model: it has no cached decoding path")
        h = self.tok_embeddings(input_ids)
        h = h + self.shift(F.pad(h, (0, 0, 1, 0))[:, :-1])  # position t gets e(x_{t-1}), zeros at t = 0
        for layer in self.layers:
            h = layer(h)
        return h


TASK_MODELS = {"lm": ComposerModel, "autoencoder": CompressionAutoEncoder, "lm-shift": ShiftStemLM}


def build_task_model(
    arch: ArchConfig, kind: str = "lm", device: torch.device | str | None = None
) -> nn.Module:
    """``lm``: the pattern as a causal LM (:class:`ComposerModel`); ``autoencoder``: :class:`CompressionAutoEncoder`;
    ``lm-shift``: :class:`ShiftStemLM` (the recall probe's)."""
    try:
        model_class = TASK_MODELS[kind]
    except KeyError:
        raise ValueError(f"unknown task model {kind!r}; choose one of: {', '.join(TASK_MODELS)}") from None
    with torch.device(device or "cpu"):
        return model_class(arch)


def round_up(value: int, multiple: int = 8) -> int:
    return int(math.ceil(value / multiple) * multiple)
