from __future__ import annotations

import torch
import torch.nn.functional as F

from composer.loss import IGNORE_INDEX, cross_entropy


def test_matches_torch_cross_entropy_with_ignored_targets():
    logits = torch.randn(2, 7, 11, requires_grad=True)
    targets = torch.randint(0, 11, (2, 7))
    targets[0, :3] = IGNORE_INDEX
    ours = cross_entropy(logits, targets)
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(ours, expected)
    (grad_ours,) = torch.autograd.grad(ours, logits)
    (grad_expected,) = torch.autograd.grad(expected, logits)
    torch.testing.assert_close(grad_ours, grad_expected)


def test_gradcheck_in_float64():
    logits = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([0, 5, IGNORE_INDEX, 2, 2])
    assert torch.autograd.gradcheck(lambda x: cross_entropy(x, targets), (logits,))


def test_all_ignored_is_zero_not_nan():
    logits = torch.randn(3, 4, requires_grad=True)
    loss = cross_entropy(logits, torch.full((3,), IGNORE_INDEX))
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(logits.grad).all()


def test_half_precision_logits_are_computed_in_float32():
    logits = torch.randn(4, 9).bfloat16().requires_grad_()
    targets = torch.randint(0, 9, (4,))
    loss = cross_entropy(logits, targets)
    loss.backward()
    assert loss.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16


def test_the_compiled_path_matches_eager_and_keeps_zero_for_no_targets():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    targets = torch.randint(0, 11, (3, 5))
    targets[0, :2] = IGNORE_INDEX
    compiled = torch.compile(cross_entropy, backend="aot_eager")
    eager_loss = cross_entropy(logits, targets)
    (eager_grad,) = torch.autograd.grad(eager_loss, logits)
    loss = compiled(logits, targets)
    (grad,) = torch.autograd.grad(loss, logits)
    torch.testing.assert_close(loss, eager_loss)
    torch.testing.assert_close(grad, eager_grad)
    assert compiled(logits, torch.full_like(targets, IGNORE_INDEX)).item() == 0.0
