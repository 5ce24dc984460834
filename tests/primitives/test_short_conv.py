"""The short convolution's CPU taps and decode step compute what ``F.conv1d`` computes (values and gradients)."""

from __future__ import annotations

import pytest
import torch

from primitives.short_conv import _ShiftedTaps, causal_depthwise_conv1d, conv_step, reference_conv1d


@pytest.mark.parametrize("width", [1, 2, 4])
@pytest.mark.parametrize("with_bias", [True, False])
def test_taps_equal_conv1d_values_and_gradients(width, with_bias):
    torch.manual_seed(0)
    x = torch.randn(3, 11, 6, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(6, 1, width, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(6, dtype=torch.float64, requires_grad=True) if with_bias else None
    inputs = [t for t in (x, weight, bias) if t is not None]
    out, expected = causal_depthwise_conv1d(x, weight, bias), reference_conv1d(x, weight, bias)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(out)
    for got, want in zip(torch.autograd.grad(out, inputs, grad), torch.autograd.grad(expected, inputs, grad)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda *t: _ShiftedTaps.apply(t[0], t[1], t[2] if with_bias else None),
                                    (x[:, :5], weight, bias if with_bias else torch.zeros(6, dtype=torch.float64)))


def test_taps_in_slices_of_the_batch_equal_conv1d(monkeypatch):
    from primitives import short_conv

    monkeypatch.setattr(short_conv, "_CPU_BLOCK_BYTES", 1)  # one sequence per slice
    torch.manual_seed(0)
    x = torch.randn(3, 7, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(5, 1, 4, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, requires_grad=True)
    out, expected = causal_depthwise_conv1d(x, weight, bias), reference_conv1d(x, weight, bias)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    for got, want in zip(torch.autograd.grad(out, (x, weight, bias), grad),
                         torch.autograd.grad(expected, (x, weight, bias), grad)):
        torch.testing.assert_close(got, want)


def test_a_later_input_never_reaches_an_earlier_output():
    x = torch.randn(2, 9, 4, requires_grad=True)
    out = causal_depthwise_conv1d(x, torch.randn(4, 1, 4))
    (grad,) = torch.autograd.grad(out[:, 5].sum(), x)
    assert grad[:, 6:].abs().max() == 0 and grad[:, 2:6].abs().min() > 0


def test_bf16_sums_in_fp32_as_conv1d_does():
    torch.manual_seed(0)
    x, weight, bias = torch.randn(2, 40, 8), torch.randn(8, 1, 4), torch.randn(8)
    exact = reference_conv1d(x.double(), weight.double(), bias.double())
    out = causal_depthwise_conv1d(x.bfloat16(), weight.bfloat16(), bias.bfloat16())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), exact, rtol=2e-2, atol=2e-2)


BF16_ROUNDING = 2**-8  # bf16 keeps 8 significant bits: rounding to it moves a value by at most 2^-8 of itself


def test_bf16_backward_is_float32s_rounded_once(monkeypatch):
    """The search trains in bf16 on a CPU that computes it: the taps' bf16 gradients (input, weight, bias) must be
    float32's gradients of the same (bf16) numbers rounded once to bf16, as F.conv1d's are: within 2^-8 of each
    value, plus float32's own summation error (``atol``, 1e-5 of the largest). Found 37 roundings off in the weight's
    gradient when its products were rounded to bf16 before the sum. 4 x 200 tokens, two slices of the batch."""
    from primitives import short_conv

    torch.manual_seed(0)
    x, weight, bias = torch.randn(4, 200, 32), torch.randn(32, 1, 4) / 2, torch.randn(32)
    grad = torch.randn(4, 200, 32).bfloat16()
    monkeypatch.setattr(short_conv, "_CPU_BLOCK_BYTES", 2 * 200 * 32 * 2)  # two sequences a slice
    assert short_conv.cpu_batch_slices(4, 200, 32, 2) == 2
    results = {}
    for dtype, conv in ((torch.bfloat16, causal_depthwise_conv1d), (torch.float32, reference_conv1d)):
        inputs = [t.bfloat16().to(dtype).requires_grad_() for t in (x, weight, bias)]
        out = conv(*inputs)
        results[dtype] = [out, *torch.autograd.grad(out, inputs, grad.to(dtype))]
    for name, got, want in zip(("output", "input", "weight", "bias"), results[torch.bfloat16],
                               results[torch.float32], strict=True):
        assert got.dtype == torch.bfloat16, name
        torch.testing.assert_close(got.float(), want, rtol=BF16_ROUNDING, atol=1e-5 * want.abs().max().item(),
                                   msg=lambda message, name=name: f"{name}: {message}")


@pytest.mark.parametrize("steps", [[1] * 7, [3, 1, 1, 2]])
def test_decode_steps_continue_the_whole_sequence(steps):
    torch.manual_seed(0)
    x, weight, bias = torch.randn(2, sum(steps), 5), torch.randn(5, 1, 4), torch.randn(5)
    history = torch.zeros(2, 3, 5)
    outputs, start = [], 0
    for n in steps:
        outputs.append(conv_step(history, x[:, start : start + n], weight, bias))
        start += n
    torch.testing.assert_close(torch.cat(outputs, dim=1), reference_conv1d(x, weight, bias))
    torch.testing.assert_close(history, x[:, -3:])
