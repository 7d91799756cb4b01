"""model/fused_loss.py: ``linear_cross_entropy`` equals ``F.cross_entropy`` of the full logits, in
its loss and both gradients, for every chunk size, on both paths (real rows with reused buffers,
padded rows masked), with ignored targets, an underflowing probability and bf16 operands."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from test_gpt import one_thread  # noqa: F401  (test_gpt's autouse fixture: one torch thread for this module)

from model.fused_loss import linear_cross_entropy


@pytest.mark.parametrize("padded", [False, True])  # real-rows matmul with reused buffers (CPU) / padded + masked (GPU)
def test_linear_cross_entropy_chunks_and_edge_cases(padded):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 8, generator=g, requires_grad=True)
    w = torch.randn(13, 8, generator=g, requires_grad=True)
    t = torch.randint(0, 11, (37,), generator=g)
    t[[3, 5]] = -1
    expected = F.cross_entropy(x @ w[:11].t(), t, ignore_index=-1)
    for chunk in (1, 5, 64):
        got = linear_cross_entropy(x, w, t, chunk=chunk, vocab_size=11, padded=padded)
        torch.testing.assert_close(got, expected)
        gx, gw = torch.autograd.grad(got, [x, w])
        ex, ew = torch.autograd.grad(expected, [x, w], retain_graph=True)
        torch.testing.assert_close(gx, ex)
        torch.testing.assert_close(gw, ew)
        assert gw[11:].eq(0).all()  # the padding rows (random here, not zero) are never scored
    # a target whose probability underflows float32 still gets its exact, finite loss
    far = torch.tensor([[300.0, -300.0]])
    eye = torch.eye(2)
    assert linear_cross_entropy(far, eye, torch.tensor([1]), padded=padded).item() == pytest.approx(600.0)
    # every target ignored: NaN, as F.cross_entropy
    assert math.isnan(linear_cross_entropy(x, w, torch.full((37,), -1), padded=padded).item())


def test_linear_cross_entropy_bf16_chunks_reuse_no_stale_rows():
    # bf16 operands: the logits are widened to fp32 in a second buffer that every chunk reuses;
    # a short last chunk (37 = 7 x 5 + 2) must see only its own rows
    g = torch.Generator().manual_seed(3)
    x = torch.randn(37, 8, generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.randn(13, 8, generator=g).to(torch.bfloat16).requires_grad_()
    t = torch.randint(0, 11, (37,), generator=g)
    t[[0, 36]] = -1
    xf, wf = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    expected = F.cross_entropy(xf @ wf[:11].t(), t, ignore_index=-1)
    ex, ew = torch.autograd.grad(expected, [xf, wf])
    rounded = F.cross_entropy((x.detach() @ w.detach()[:11].t()).float(), t, ignore_index=-1)  # bf16 logits
    for chunk in (5, 64):
        got = linear_cross_entropy(x, w, t, chunk=chunk, vocab_size=11)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, rounded, atol=1e-5, rtol=1e-5)
        gx, gw = torch.autograd.grad(got, [x, w])
        assert gx.dtype == gw.dtype == torch.bfloat16
        torch.testing.assert_close(gx.float(), ex, atol=2e-3, rtol=2e-2)
        torch.testing.assert_close(gw.float(), ew, atol=2e-3, rtol=2e-2)
