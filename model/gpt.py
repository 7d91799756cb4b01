"""GPT-1 and GPT-2 in one file: a decoder-only transformer selected by ``GPTConfig.arch``.

    embeddings   token + learned position embeddings, dropout; the token embedding is
                 also the output projection (tied input/output embeddings)
    gpt2 block   x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))        (pre-LN) + final ln_f
    gpt1 block   x = ln_1(x + attn(x)); x = ln_2(x + mlp(x))        (post-LN), no final LN
    attention    causal multi-head self-attention, one fused q/k/v projection,
                 ``F.scaled_dot_product_attention(is_causal=True)``
    mlp          Linear(C, 4C) -> GELU (tanh form) -> Linear(4C, C)

The parameter names follow Hugging Face ``GPT2LMHeadModel`` (``transformer.h.0.attn.c_attn``
...) so that ``model/hf.py`` maps them one to one; our projections are ``nn.Linear``
(weight ``[out, in]``), HF's are ``Conv1D`` (weight ``[in, out]``).

The token embedding has ``padded_vocab_size`` rows (the vocabulary rounded up to a multiple
of 64, a GPU matmul-friendly size); the padding rows are zero, never looked up and never
scored: logits are computed over the real vocabulary only.

With targets, the loss is computed by ``linear_cross_entropy``: the output projection and
the cross-entropy fused over chunks of positions, so the ``[B*T, vocab]`` logits are never
held in memory at once (in training the chunk's gradients are formed right away, the way
Liger-Kernel's fused linear cross-entropy does). Pass ``return_logits=False`` to skip the
full logits when only the loss is wanted (training); the default returns both.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

INIT_STD = 0.02  # GPT-1 section 4.1 / GPT-2: weights initialised from N(0, 0.02)
MLP_RATIO = 4  # GPT-1 section 4.1: 3072-wide inner states for a 768-wide model
GPT2_VOCAB = 50257  # GPT-2 section 2.2: byte-level BPE vocabulary of 50,257 tokens
LOSS_CHUNK_TOKENS = 256  # positions per chunk of the fused projection + cross-entropy (CPU; measured)
LOSS_CHUNK_TOKENS_CUDA = 8192  # on a GPU, bigger chunks keep the matmuls large

# name -> (arch, n_layer, n_head, n_embd, block_size, dropout)
_NAMED = {
    # GPT-1 (Radford et al. 2018, section 4.1): 12 x 768, 12 heads, context 512, dropout 0.1
    "gpt1": ("gpt1", 12, 12, 768, 512, 0.1),
    # GPT-2 (Radford et al. 2019, Table 2) sizes; context 1024. Dropout 0.0 as nanoGPT
    # trains them (the paper does not state a rate; set dropout= to change it).
    "gpt2": ("gpt2", 12, 12, 768, 1024, 0.0),
    "gpt2-medium": ("gpt2", 24, 16, 1024, 1024, 0.0),
    "gpt2-large": ("gpt2", 36, 20, 1280, 1024, 0.0),
    "gpt2-xl": ("gpt2", 48, 25, 1600, 1024, 0.0),
}
# The paper's parameter counts (117M ...) and the recounted ones (124M ...) name the same models.
_ALIASES = {
    "124m": "gpt2", "117m": "gpt2",
    "345m": "gpt2-medium", "350m": "gpt2-medium",
    "762m": "gpt2-large", "774m": "gpt2-large",
    "1542m": "gpt2-xl", "1558m": "gpt2-xl",
}
ARCHS = ("gpt1", "gpt2")


@dataclass
class GPTConfig:
    arch: str = "gpt2"  # "gpt2" (pre-LN + final LN) or "gpt1" (post-LN, no final LN)
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    block_size: int = 1024  # context length (GPT-1: 512)
    vocab_size: int = GPT2_VOCAB
    dropout: float = 0.0  # residual, embedding and attention dropout
    bias: bool = True
    layer_norm_epsilon: float = 1e-5
    pad_vocab_multiple: int = 64  # nanoGPT: 50257 -> 50304, a multiple of 64, for faster matmuls

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, got {self.arch!r}")
        for name in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "pad_vocab_multiple"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout!r}")
        if not float(self.layer_norm_epsilon) > 0:
            raise ValueError(f"layer_norm_epsilon must be positive, got {self.layer_norm_epsilon!r}")

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_multiple
        return (self.vocab_size + m - 1) // m * m

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @classmethod
    def names(cls) -> list[str]:
        return list(_NAMED) + list(_ALIASES)

    @classmethod
    def named(cls, name: str, **overrides) -> "GPTConfig":
        """A published size by name ("gpt1", "gpt2", "124M", "gpt2-xl", ...), with overrides."""
        key = str(name).strip().lower()
        key = _ALIASES.get(key, key)
        if key not in _NAMED:
            raise ValueError(f"unknown model name {name!r}; known names: {', '.join(cls.names())}")
        arch, n_layer, n_head, n_embd, block_size, dropout = _NAMED[key]
        base = dict(arch=arch, n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, dropout=dropout)
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown GPTConfig field(s) {sorted(unknown)}")
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GPTConfig":
        if not isinstance(d, dict):
            raise ValueError(f"a GPT config must be a dict, got {type(d).__name__}")
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown GPTConfig field(s) {sorted(unknown)}")
        return cls(**d)


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout that is not called at all when it would do nothing (p = 0 or evaluation)."""
    return F.dropout(x, p, training=True) if training and p > 0 else x


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)
        return _dropout(self.c_proj(y), self.dropout, self.training)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, MLP_RATIO * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(MLP_RATIO * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # GPT-1 section 4.1 / GPT-2: GELU in its tanh approximation (HF "gelu_new")
        return _dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")), self.dropout, self.training)


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.pre_ln = config.arch == "gpt2"
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:  # GPT-2 section 2.3: layer norm moved to the input of each sub-block
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x))  # GPT-1: the original transformer's post-LN residual
        return self.ln_2(x + self.mlp(x))


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
        if grad_w is not None:
            grad_w[vocab_size:].zero_()  # the padding rows are never scored
        total = torch.zeros((), dtype=precise, device=x.device)
        # One [chunk, V] buffer each for the logits and the probabilities, reused by every chunk:
        # on CPU a fresh tensor this large comes from mmap and pays a page fault per 4 KiB page
        # on first write, every chunk (about 20 ms per 50 MB buffer on the development machine).
        reuse = not torch.compiler.is_compiling()
        if reuse:
            rows = min(chunk, n)
            mm_buf = torch.empty((rows, vocab_size), dtype=x.dtype, device=x.device)
            wide_buf = mm_buf if x.dtype == precise else torch.empty((rows, vocab_size), dtype=precise, device=x.device)
            probs_buf = torch.empty((rows, vocab_size), dtype=precise, device=x.device)
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            xs, ts, ok, sc = x[start:end], safe[start:end, None], valid[start:end], scale[start:end, None]
            if reuse:
                m = end - start
                logits = torch.mm(xs, w.t(), out=mm_buf[:m])
                if wide_buf is not mm_buf:
                    logits = wide_buf[:m].copy_(logits)
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
                target = grad_w[:vocab_size]
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
    (``_LinearCrossEntropy.forward_padded``); off, over the real rows with reused buffers (CPU).
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


LOSS_IMPLS = ("chunked", "full")  # the training loss path: linear_cross_entropy, or padded logits + F.cross_entropy


class GPT(nn.Module):
    # "chunked": linear_cross_entropy (no [B*T, V] logits). "full": the logits over all
    # V_padded rows (aligned matmul), cut to the real vocabulary, then F.cross_entropy: under
    # torch.compile the slice, the cast and the loss fuse into the compiler's own kernels.
    loss_impl = "chunked"

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
        ))
        if config.arch == "gpt2":  # GPT-2 section 2.3: an extra layer norm after the final block
            self.transformer["ln_f"] = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """N(0, 0.02) everywhere; GPT-2's residual projections N(0, 0.02 / sqrt(2 * n_layer)); zero padding rows."""
        # GPT-2 section 2.3: "scale the weights of residual layers at initialization by a factor
        # of 1/sqrt(N) where N is the number of residual layers" (two per block)
        residual_std = INIT_STD / math.sqrt(2 * self.config.n_layer) if self.config.arch == "gpt2" else INIT_STD
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                std = residual_std if name.endswith("c_proj") else INIT_STD
                nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        with torch.no_grad():
            self.transformer.wte.weight[self.config.vocab_size:].zero_()

    @property
    def output_weight(self) -> torch.Tensor:
        """The output projection: the token embedding's real-vocabulary rows (tied weights)."""
        return self.transformer.wte.weight[: self.config.vocab_size]

    def hidden_states(self, idx: torch.Tensor) -> torch.Tensor:
        """The final hidden states ``[B, T, C]`` (after ``ln_f`` for GPT-2) for token ids ``[B, T]``."""
        if idx.dim() != 2:
            raise ValueError(f"idx must be a [batch, time] tensor of token ids, got shape {tuple(idx.shape)}")
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than the model's context "
                             f"(block_size={self.config.block_size})")
        if T == 0:
            raise ValueError("idx holds no tokens (time dimension is 0)")
        # the id check reads values back: done on CPU only (on GPU it would stall every step), not under compile
        if idx.device.type == "cpu" and idx.numel() and not torch.compiler.is_compiling():
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(f"token ids must lie in 0..{self.config.vocab_size - 1}, got {lo}..{hi}")
        pos = torch.arange(T, device=idx.device)
        x = _dropout(self.transformer.wte(idx) + self.transformer.wpe(pos), self.config.dropout, self.training)
        for block in self.transformer.h:
            x = block(x)
        if "ln_f" in self.transformer:
            x = self.transformer.ln_f(x)
        return x

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, ignore_index: int = -1,
                return_logits: bool = True) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(logits [B, T, vocab_size] float, mean cross-entropy or None)``.

        Targets equal to ``ignore_index`` are not scored. With ``return_logits=False`` and
        targets, the logits are not formed (``None``): the loss comes from the fused chunked
        projection + cross-entropy, the fast and memory-light way to train.
        """
        x = self.hidden_states(idx)
        loss = None
        if targets is not None:
            if targets.shape != idx.shape:
                raise ValueError(f"targets shape {tuple(targets.shape)} differs from idx shape {tuple(idx.shape)}")
            if not return_logits and self.loss_impl == "full":
                logits = F.linear(x, self.transformer.wte.weight)[..., : self.config.vocab_size]
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                                       ignore_index=ignore_index)
                return None, loss
            if not return_logits:
                loss = linear_cross_entropy(x.reshape(-1, x.shape[-1]), self.transformer.wte.weight, targets.reshape(-1),
                                            ignore_index=ignore_index, vocab_size=self.config.vocab_size)
                return None, loss
        logits = F.linear(x, self.output_weight).float()
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index)
        return logits, loss

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Trainable parameters, the tied token embedding counted once over the real vocabulary.

        The zero padding rows of the token embedding are not counted (they are never read).
        ``exclude_embeddings=True`` leaves out the position embeddings, nanoGPT's
        "non-embedding" count: the token embedding stays, since it is also the output layer.
        124M config: 124,439,808 (123,653,376 without position embeddings).
        """
        seen, total = set(), 0
        for p in self.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        total -= (self.config.padded_vocab_size - self.config.vocab_size) * self.config.n_embd
        if exclude_embeddings:
            total -= self.transformer.wpe.weight.numel()
        return total

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token, forward + backward: ``6 N + 12 L C T`` (nanoGPT / PaLM appendix B).

        N is the non-embedding count (``num_parameters(exclude_embeddings=True)``); the second
        term is attention's ``q k^T`` and ``att v``. 124M at T=1024: 855,166,464.
        """
        T = self.config.block_size if seq_len is None else int(seq_len)
        c = self.config
        return float(6 * self.num_parameters(exclude_embeddings=True) + 12 * c.n_layer * c.n_embd * T)


# ----------------------------------------------------------------------------- decoding with a KV cache

class KVCache:
    """The keys and values of every layer for a batch of rows, preallocated to ``length``
    positions, and which cache slots hold a real token (rows are left-padded to one length).
    Used by ``GPT.decode``; ``model/generate.py`` drives it."""

    def __init__(self, config: GPTConfig, batch: int, length: int, device=None, dtype=torch.float32):
        if length > config.block_size:
            raise ValueError(f"a cache of {length} positions is longer than the model's context "
                             f"(block_size={config.block_size})")
        self.kv = torch.zeros((config.n_layer, 2, batch, config.n_head, length, config.head_dim), device=device,
                              dtype=dtype)
        self.valid = torch.zeros((batch, length), dtype=torch.bool, device=device)
        self.filled = 0  # slots written so far

    @property
    def length(self) -> int:
        return self.kv.shape[-2]


def _cached_attention(attn: CausalSelfAttention, x: torch.Tensor, kv: torch.Tensor, start: int,
                      mask: torch.Tensor) -> torch.Tensor:
    """``attn(x)`` for new positions ``start..start+T`` of the cache, their keys/values stored in ``kv`` ``[2, B, H, S, D]``."""
    B, T, C = x.shape
    q, k, v = attn.c_attn(x).view(B, T, 3, attn.n_head, C // attn.n_head).permute(2, 0, 3, 1, 4).unbind(0)
    kv[0, :, :, start:start + T] = k
    kv[1, :, :, start:start + T] = v
    y = F.scaled_dot_product_attention(q, kv[0, :, :, :start + T], kv[1, :, :, :start + T], attn_mask=mask)
    return attn.c_proj(y.transpose(1, 2).reshape(B, T, C))


def _cached_block(block: Block, x: torch.Tensor, kv: torch.Tensor, start: int, mask: torch.Tensor) -> torch.Tensor:
    if block.pre_ln:
        x = x + _cached_attention(block.attn, block.ln_1(x), kv, start, mask)
        return x + block.mlp(block.ln_2(x))
    x = block.ln_1(x + _cached_attention(block.attn, x, kv, start, mask))
    return block.ln_2(x + block.mlp(x))


@torch.no_grad()
def decode(model: GPT, idx: torch.Tensor, cache: KVCache, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Run the new tokens ``idx`` ``[B, T]`` (evaluation mode) after what ``cache`` holds; return the
    logits of the last new position ``[B, vocab_size]`` (float) and append the tokens' keys and values.

    ``valid`` ``[B, T]`` marks real tokens (False: left padding, never attended to). A token's
    position is the number of real tokens before it in its row, so a left-padded row computes
    what it would alone.
    """
    B, T = idx.shape
    start = cache.filled
    if start + T > cache.length:
        raise ValueError(f"{start + T} positions do not fit the cache of {cache.length}")
    valid = torch.ones_like(idx, dtype=torch.bool) if valid is None else valid
    cache.valid[:, start:start + T] = valid
    seen = cache.valid[:, :start + T]
    pos = (seen.long().cumsum(dim=1) - 1).clamp(min=0)[:, start:]
    slots = torch.arange(start + T, device=idx.device)
    causal = slots[None, :] <= slots[start:, None]  # [T, S]
    # a padding query attends to itself alone (its output is never used; a row of -inf would give NaN)
    mask = (causal[None] & seen[:, None, :]) | (slots[None, None, :] == slots[start:, None][None])
    x = model.transformer.wte(idx) + model.transformer.wpe(pos)
    for layer, block in enumerate(model.transformer.h):
        x = _cached_block(block, x, cache.kv[layer], start, mask[:, None])
    if "ln_f" in model.transformer:
        x = model.transformer.ln_f(x[:, -1:])
    cache.filled = start + T
    return F.linear(x[:, -1], model.output_weight).float()
