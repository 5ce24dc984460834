"""Rotary position embeddings (RoPE) with Llama-3 frequency scaling.

Uses the "rotate half" layout of Hugging Face's Llama so that checkpoints convert without permuting q/k weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RopeScaling:
    """Llama-3 long-context frequency scaling (``rope_type: llama3`` in Hugging Face configs).

    Low frequencies (wavelengths longer than ``original_max_seq_len / low_freq_factor``) are divided by
    ``factor``; high frequencies are kept; the band between is interpolated smoothly.
    """

    factor: float = 32.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_seq_len: int = 8192

    def __post_init__(self) -> None:
        if self.factor <= 0 or self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"invalid rope scaling {self}: need factor > 0 and high_freq_factor > low_freq_factor"
            )

    def apply(self, inv_freq: torch.Tensor) -> torch.Tensor:
        low_freq_wavelen = self.original_max_seq_len / self.low_freq_factor
        high_freq_wavelen = self.original_max_seq_len / self.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / self.factor, inv_freq)
        smooth = (self.original_max_seq_len / wavelen - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / self.factor + smooth * scaled
        is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
        return torch.where(is_medium, smoothed, scaled)


def inverse_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None) -> torch.Tensor:
    """Per-pair rotation frequencies, float32, shape ``[head_dim // 2]``."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    return scaling.apply(inv_freq) if scaling is not None else inv_freq


def rotary_cos_sin(
    inv_freq: torch.Tensor, seq_len: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of shape ``[seq_len, 1, head_dim]`` (broadcast over batch and heads)."""
    positions = torch.arange(seq_len, device=inv_freq.device, dtype=torch.float32)
    angles = torch.outer(positions, inv_freq)
    angles = torch.cat((angles, angles), dim=-1).unsqueeze(1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``[batch, seq, heads, head_dim]``."""
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin
