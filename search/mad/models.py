"""Models the MAD tasks train: the candidate as a causal LM, or inside MAD's compression auto-encoder."""

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


def build_task_model(
    arch: ArchConfig, kind: str = "lm", device: torch.device | str | None = None
) -> nn.Module:
    """``lm``: the pattern as a causal LM (:class:`ComposerModel`); ``autoencoder``: :class:`CompressionAutoEncoder`."""
    with torch.device(device or "cpu"):
        if kind == "lm":
            return ComposerModel(arch)
        if kind == "autoencoder":
            return CompressionAutoEncoder(arch)
    raise ValueError(f"unknown task model {kind!r}; choose 'lm' or 'autoencoder'")


def round_up(value: int, multiple: int = 8) -> int:
    return int(math.ceil(value / multiple) * multiple)
