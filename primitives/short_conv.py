"""The causal depthwise short convolution that ``S`` (Mamba-2) and ``D`` (Gated DeltaNet) run before their
mixers: each channel sees its last ``width`` inputs (``width`` 4 in both), never a later one.

Two forms of one computation, both ``[batch, seq, channels]`` with ``weight [channels, 1, width]`` (the layout of
``nn.Conv1d(groups=channels)``, so the layers' state dicts stay mamba_ssm's and fla's):

* :func:`causal_depthwise_conv1d`, a whole sequence (training, prefill). On a CPU it is ``width`` shifted
  multiply-adds with a hand-written backward (:class:`_ShiftedTaps`): oneDNN's depthwise ``conv1d`` spends most
  of a Mamba-2 layer's non-matmul time in its backward (12 ms of a 100 ms layer at demo-4m, 16 x 128 tokens,
  one thread), and a tap is one pass over memory. Elsewhere ``F.conv1d`` (cuDNN).
* :func:`conv_step`, the next few tokens of a sequence whose last ``width - 1`` inputs are cached (decoding).
  One token is one multiply and one sum per channel: ``F.conv1d``'s setup alone took 75 us of a decode step's
  layer on a CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


# The taps run over a slice of the batch at a time, as many sequences as fit this many bytes: each tap is one
# pass over memory, and a slice that stays in a core's L2 cache (1-2 MiB on server CPUs) between the taps is read
# from there. At demo-4m (16 x 128 tokens, S's 512 channels, one thread) forward and backward took 0.68x the time
# of whole-batch taps.
_CPU_BLOCK_BYTES = 1 << 19


class _ShiftedTaps(torch.autograd.Function):
    """``out[t] = bias + sum_i weight[:, i] * x[t - width + 1 + i]`` (zeros before the start), by taps.

    Backward: the input's gradient is the same sum run the other way (``grad`` shifted forward, each tap's
    weight); each tap's weight gradient is the dot product, per channel, of ``grad`` with the input that tap
    read. Both in slices of the batch (:data:`_CPU_BLOCK_BYTES`). Runs under ``torch.compile``
    (tests/primitives/test_compile.py).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        taps = weight[:, 0, :]
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return torch.cat([_taps(part, taps, bias) for part in _slices(x)])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        taps = weight[:, 0, :]
        width, seq = taps.shape[-1], grad.shape[1]
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:  # the taps run backwards in time: grad shifted forward, the taps reversed
            grad_x = torch.cat([_taps(part, taps, ahead=True) for part in _slices(grad)])
        if ctx.needs_input_grad[1]:
            total = taps.new_zeros(taps.shape, dtype=_accumulate_in(taps.dtype))
            for part, inputs in zip(_slices(grad), _slices(x)):
                # the products in float32 too (a no-op for float32 inputs): bf16 products, each rounded before the
                # sum, put a tap's gradient up to 37 bf16 roundings from float32's, where F.conv1d's is within one
                part = part.to(total.dtype)
                padded = F.pad(inputs.to(total.dtype), (0, 0, width - 1, 0))
                for i in range(width):
                    total[:, i] += (part * padded[:, i : i + seq]).sum((0, 1))
            grad_weight = total.to(weight.dtype).unsqueeze(1)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.sum((0, 1))
        return grad_x, grad_weight, grad_bias


def _slices(t: torch.Tensor) -> list[torch.Tensor]:
    """``t [batch, seq, channels]`` in slices of whole sequences of at most :data:`_CPU_BLOCK_BYTES`."""
    return list(t.split(_sequences_per_slice(t.shape[1], t.shape[2], t.element_size())))


def _sequences_per_slice(seq: int, channels: int, itemsize: int) -> int:
    return max(1, _CPU_BLOCK_BYTES // (seq * channels * itemsize))


def cpu_batch_slices(batch: int, seq: int, channels: int, itemsize: int) -> int:
    """How many slices of the batch :func:`causal_depthwise_conv1d` runs its taps in on a CPU, for an input of
    ``batch x seq x channels`` elements of ``itemsize`` bytes. Each slice runs every tap again, so a layer's op
    count grows with this number, not with the batch: the cost model (``composer.costmodel.work``) counts a
    layer's ops by it, from this rule, so the two cannot drift apart."""
    return -(-batch // _sequences_per_slice(seq, channels, itemsize))


def _taps(x: torch.Tensor, taps: torch.Tensor, bias: torch.Tensor | None = None, ahead: bool = False) -> torch.Tensor:
    """The causal taps on one slice ``x [batch, seq, channels]``, ``taps [channels, width]``: tap ``i`` reads
    ``width - 1 - i`` positions back (``ahead``: as many forward, the input gradient's sum). Summed in at least
    float32, returned in ``x``'s dtype."""
    width, seq = taps.shape[-1], x.shape[1]
    padded = F.pad(x, (0, 0, 0, width - 1) if ahead else (0, 0, width - 1, 0))
    out = x.to(_accumulate_in(x.dtype)) * taps[:, width - 1]  # bf16 sums in fp32, as F.conv1d does
    for i in range(width - 1):
        start = width - 1 - i if ahead else i
        out.addcmul_(padded[:, start : start + seq], taps[:, i])
    if bias is not None:
        out.add_(bias)
    return out.to(x.dtype)


def _accumulate_in(dtype: torch.dtype) -> torch.dtype:
    """Sums of taps run in at least float32 (a bf16 running sum would round at every tap)."""
    return torch.promote_types(dtype, torch.float32)


def causal_depthwise_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Causal depthwise convolution of ``x [batch, seq, channels]`` with ``weight [channels, 1, width]``.

    Position ``t`` sees ``t - width + 1 .. t`` (left zero padding), so no output depends on a later input."""
    if x.device.type == "cpu":
        return _ShiftedTaps.apply(x, weight, bias)
    return reference_conv1d(x, weight, bias)


def reference_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`causal_depthwise_conv1d` through ``F.conv1d``: what runs off the CPU, and what the taps are tested
    against."""
    width = weight.shape[-1]
    out = F.conv1d(F.pad(x.transpose(1, 2), (width - 1, 0)), weight, bias, groups=x.shape[-1])
    return out.transpose(1, 2)


def conv_step(history: torch.Tensor, new: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """Causal depthwise convolution of ``new [batch, n, channels]`` continuing a sequence whose last
    ``width - 1`` inputs are ``history [batch, width - 1, channels]`` (zeros at the start of a sequence: the same
    left padding as :func:`causal_depthwise_conv1d`). Updates ``history`` in place to the last ``width - 1``
    inputs and returns the ``n`` outputs."""
    width = weight.shape[-1]
    full = torch.cat([history.to(new.dtype), new], dim=1)
    if width > 1:
        history.copy_(full[:, full.shape[1] - (width - 1) :])
    if new.shape[1] == 1:  # a decoding step: per channel, the dot product of its window with its taps
        total = _accumulate_in(new.dtype)
        out = (full * weight[:, 0, :].t()).sum(1, keepdim=True, dtype=None if total == new.dtype else total)
        return (out if bias is None else out + bias).to(new.dtype)
    return F.conv1d(full.transpose(1, 2), weight, bias, groups=new.shape[-1]).transpose(1, 2)
