"""The fused output projection + cross-entropy that trains ``model.gpt.GPT`` without ``[B*T, V]`` logits.

``linear_cross_entropy(x, weight, targets)`` equals
``F.cross_entropy(x @ weight[:vocab_size].T, targets)`` (mean, fp32) but runs over chunks
of positions: each chunk's logits are formed, turned into the loss and, in training, into
the gradients of ``x`` and ``weight`` right away (the way Liger-Kernel's fused linear
cross-entropy does), so only a ``[chunk, V]`` buffer is ever held. ``GPT.forward`` computes
every loss through ``LOSSES[model.loss_impl]``, this function by default; fine-tuning calls it
for GPT-1's auxiliary language-modelling loss. ``logits_cross_entropy`` is the alternative
(the trainer's ``--loss_impl full``): the same loss from the padded logits, left to the compiler.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

LOSS_CHUNK_TOKENS = 256  # positions per chunk of the fused projection + cross-entropy (CPU; measured)
LOSS_CHUNK_TOKENS_CUDA = 8192  # on a GPU, bigger chunks keep the matmuls large


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``x @ weight[:vocab].T`` against ``targets``, one chunk of positions at a time.

    Forward keeps only the gradients (``dL/dx`` ``[N, C]`` and ``dL/dweight``), never the
    ``[N, V]`` logits; backward scales them by the incoming gradient. Per chunk: one matmul
    for the logits, one fused ``softmax`` pass, then ``d logits = softmax - onehot`` feeds
    the two gradient matmuls; the ``1 / count`` scale and the ignored rows are applied to
    the small ``[chunk, C]`` operands, not to the ``[chunk, V]`` probabilities.
    """

    @staticmethod
    def forward(ctx, x, weight, targets, vocab_size, ignore_index, chunk, padded=False):
        if padded:
            return _LinearCrossEntropy.forward_padded(ctx, x, weight, targets, vocab_size, ignore_index, chunk)
        n = x.shape[0]
        w = weight[:vocab_size]
        valid = targets != ignore_index
        count = valid.sum()
        precise = torch.promote_types(x.dtype, torch.float32)
        scale = valid.to(precise) / count.clamp(min=1).to(precise)  # per-row d(mean)/d(row loss)
        safe = torch.where(valid, targets, torch.zeros_like(targets))
        grad_x = torch.empty_like(x) if ctx.needs_input_grad[0] else None
        accumulate = torch.promote_types(weight.dtype, torch.float32)  # the weight gradient sums chunks in >= fp32
        grad_w = torch.empty(weight.shape, dtype=accumulate, device=weight.device) if ctx.needs_input_grad[1] else None
        total = torch.zeros((), dtype=precise, device=x.device)
        # One [chunk, V_padded] buffer each for the logits and the probabilities, reused by every
        # chunk: on CPU a fresh tensor this large comes from mmap and pays a page fault per 4 KiB
        # page on first write, every chunk (about 20 ms per 50 MB buffer on the development machine).
        # The buffers span all V_padded rows of the weight, so every row of a buffer starts at an
        # aligned address (50,304 floats, not 50,257) for the three matmuls; the padding columns
        # are set to -inf after each logits matmul, so their probability, their gradient and
        # the padding rows' weight gradient come out exactly 0.
        reuse = not torch.compiler.is_compiling()
        if reuse:
            rows, padded_vocab = min(chunk, n), weight.shape[0]
            w = weight
            mm_buf = torch.empty((rows, padded_vocab), dtype=x.dtype, device=x.device)
            wide_buf = mm_buf if x.dtype == precise else torch.empty((rows, padded_vocab), dtype=precise, device=x.device)
            probs_buf = torch.empty((rows, padded_vocab), dtype=precise, device=x.device)
        elif grad_w is not None:
            grad_w[vocab_size:].zero_()  # the padding rows are never scored
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            xs, ts, ok, sc = x[start:end], safe[start:end, None], valid[start:end], scale[start:end, None]
            if reuse:
                m = end - start
                logits = torch.mm(xs, w.t(), out=mm_buf[:m])
                if wide_buf is not mm_buf:
                    logits = wide_buf[:m].copy_(logits)
                logits[:, vocab_size:] = float("-inf")  # the padding columns: probability 0
            else:
                logits = torch.mm(xs, w.t())
                logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
            picked = logits.gather(1, ts).squeeze(1)
            if reuse:
                probs = torch.ops.aten._softmax.out(logits, 1, False, out=probs_buf[:m])
            else:
                probs = torch.softmax(logits, dim=1)
            p_target = probs.gather(1, ts).squeeze(1)
            row_loss = -torch.log(p_target)
            tiny = p_target < 1e-30  # the probability underflowed: take log-sum-exp - logit exactly
            if torch.compiler.is_compiling() or bool(tiny.any()):
                row_loss = torch.where(tiny, torch.logsumexp(logits, dim=1) - picked, row_loss)
            total = total + torch.where(ok, row_loss, torch.zeros_like(row_loss)).sum()
            del logits
            if grad_x is None and grad_w is None:
                continue
            probs.scatter_add_(1, ts, torch.full_like(p_target, -1.0).unsqueeze(1))  # softmax - onehot
            g = probs.to(x.dtype)
            if grad_x is not None:  # dL/dx = scale * (g @ W)
                torch.mm(g, w, out=grad_x[start:end])
                grad_x[start:end].mul_(sc.to(x.dtype))
            if grad_w is not None:  # dL/dW += g^T @ (scale * x)
                xs_scaled = (xs.to(sc.dtype) * sc).to(g.dtype)
                target = grad_w if reuse else grad_w[:vocab_size]
                if g.dtype == grad_w.dtype and start == 0:
                    torch.mm(g.t(), xs_scaled, out=target)
                elif g.dtype == grad_w.dtype:
                    target.addmm_(g.t(), xs_scaled)
                elif start == 0:  # bf16 / fp16 operands: the product is summed in fp32
                    target.copy_(torch.mm(g.t(), xs_scaled))
                else:
                    target.add_(torch.mm(g.t(), xs_scaled))
        ctx.save_for_backward(grad_x, grad_w)
        ctx.weight_dtype = weight.dtype
        return total / count.to(total.dtype)  # NaN when every target is ignored, as F.cross_entropy

    @staticmethod
    def forward_padded(ctx, x, weight, targets, vocab_size, ignore_index, chunk):
        """The GPU / ``torch.compile`` form: each chunk's matmuls run over all ``V_padded`` rows
        (a multiple of 64: aligned, tensor-core-friendly shapes) and the padding columns are
        masked to ``-inf``, so they get probability 0 and are never predicted. The loss is
        ``logsumexp - logit[target]``; the ``1 / count`` scale and ``- onehot`` are folded into
        one elementwise pass that yields the ``[chunk, V_padded]`` gradient in the matmul dtype,
        a pattern the compiler fuses into two kernels (a row reduction and a pointwise map)."""
        n, padded_vocab = x.shape[0], weight.shape[0]
        precise = torch.promote_types(x.dtype, torch.float32)
        valid = targets != ignore_index
        count = valid.sum()
        scale = valid.to(precise) / count.clamp(min=1).to(precise)
        safe = torch.where(valid, targets, torch.zeros_like(targets))
        columns = torch.arange(padded_vocab, device=x.device)
        real = columns < vocab_size
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grads_x, grad_w = [], None
        total = torch.zeros((), dtype=precise, device=x.device)
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            xs, ts, ok, sc = x[start:end], safe[start:end, None], valid[start:end], scale[start:end, None]
            logits = torch.where(real, torch.mm(xs, weight.t()).to(precise), float("-inf"))
            lse = torch.logsumexp(logits, dim=1, keepdim=True)
            row_loss = (lse - logits.gather(1, ts)).squeeze(1)
            total = total + torch.where(ok, row_loss, torch.zeros_like(row_loss)).sum()
            if not (need_x or need_w):
                continue
            g = ((torch.exp(logits - lse) - (columns == ts).to(precise)) * sc).to(x.dtype)  # scale * (softmax - onehot)
            if need_x:
                grads_x.append(torch.mm(g, weight))
            if need_w:
                part = torch.mm(g.t(), xs).to(precise)
                grad_w = part if grad_w is None else grad_w + part
        grad_x = (torch.cat(grads_x) if len(grads_x) > 1 else grads_x[0]) if need_x else None
        ctx.save_for_backward(grad_x, grad_w)
        ctx.weight_dtype = weight.dtype
        return total / count.to(precise)

    @staticmethod
    def backward(ctx, grad_output):
        grad_x, grad_w = ctx.saved_tensors
        if (grad_output.device.type == "cpu" and not torch.compiler.is_compiling()
                and float(grad_output) == 1.0):  # the usual loss.backward(): no copies
            gx = grad_x
            gw = grad_w.to(ctx.weight_dtype) if grad_w is not None else None
        else:
            gx = grad_x * grad_output.to(grad_x.dtype) if grad_x is not None else None
            gw = (grad_w * grad_output).to(ctx.weight_dtype) if grad_w is not None else None
        return gx, gw, None, None, None, None, None


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, ignore_index: int = -1,
                         chunk: int | None = None, vocab_size: int | None = None,
                         padded: bool | None = None) -> torch.Tensor:
    """``F.cross_entropy(x @ weight[:vocab_size].T, targets, ignore_index=...)`` (mean, fp32), no full logits.

    ``x`` is ``[N, C]``, ``weight`` ``[V_padded, C]`` (rows past ``vocab_size`` get a zero
    gradient), ``targets`` ``[N]``. Under autocast the matmuls run in the autocast dtype and
    the softmax in fp32, as ``F.linear`` + ``F.cross_entropy`` do. ``padded`` (default: on
    CUDA) runs the matmuls over all ``V_padded`` rows with the padding columns masked
    (``_LinearCrossEntropy.forward_padded``, the form ``torch.compile`` fuses); off (CPU), over
    the same rows into ``[chunk, V_padded]`` buffers that every chunk reuses, in place.
    """
    vocab_size = weight.shape[0] if vocab_size is None else vocab_size
    if chunk is None:
        chunk = LOSS_CHUNK_TOKENS_CUDA if x.is_cuda else LOSS_CHUNK_TOKENS
    if padded is None:
        padded = x.is_cuda
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        x, weight = x.to(dtype), weight.to(dtype)
    with torch.autocast(device_type, enabled=False):
        return _LinearCrossEntropy.apply(x, weight, targets, vocab_size, ignore_index, chunk, padded)


def logits_cross_entropy(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, ignore_index: int = -1,
                         vocab_size: int | None = None) -> torch.Tensor:
    """The same loss through the logits: ``x @ weight.T`` over all ``V_padded`` rows (an aligned
    matmul), cut to ``vocab_size``, then ``F.cross_entropy`` in fp32. Under ``torch.compile`` the
    slice, the cast and the loss fuse into the compiler's own kernels (``--loss_impl full``)."""
    vocab_size = weight.shape[0] if vocab_size is None else vocab_size
    logits = F.linear(x, weight)[..., :vocab_size]  # (N, Vp) -> (N, V)
    return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index)


# The training loss paths by name (GPT.loss_impl, train --loss_impl): one signature, one result.
LOSSES: dict[str, Callable[..., torch.Tensor]] = {"chunked": linear_cross_entropy, "full": logits_cross_entropy}
