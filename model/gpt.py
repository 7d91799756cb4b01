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

With targets, the loss has one path: ``LOSSES[model.loss_impl]`` (``model/fused_loss.py``),
by default ``linear_cross_entropy``, the output projection and the cross-entropy fused over
chunks of positions, so the ``[B*T, vocab]`` logits are never held in memory at once. Pass
``return_logits=False`` to skip the full logits when only the loss is wanted (training); the
default returns both (the logits are then a second projection).

Shapes in the comments: B batch, T time (positions), C channels (``n_embd``), nh heads,
hs head size (``C // nh``), V the real vocabulary, Vp the padded one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.fused_loss import LOSSES

INIT_STD = 0.02  # GPT-1 section 4.1 / GPT-2: weights initialised from N(0, 0.02)
MLP_RATIO = 4  # GPT-1 section 4.1: 3072-wide inner states for a 768-wide model
GPT2_VOCAB = 50257  # GPT-2 section 2.2: byte-level BPE vocabulary of 50,257 tokens
LOSS_IMPLS = tuple(LOSSES)  # the training loss paths: "chunked" (linear_cross_entropy), "full" (logits_cross_entropy)

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
    def named(cls, name: str, **overrides) -> GPTConfig:
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
    def from_dict(cls, d: dict) -> GPTConfig:
        if not isinstance(d, dict):
            raise ValueError(f"a GPT config must be a dict, got {type(d).__name__}")
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown GPTConfig field(s) {sorted(unknown)}")
        return cls(**d)


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout that is not called at all when it would do nothing (p = 0 or evaluation)."""
    return F.dropout(x, p, training=True) if training and p > 0 else x


class _TiedTokenEmbedding(torch.autograd.Function):
    """The token lookup and the output layer's weight as one autograd node (tied embeddings, CPU training).

    Forward returns the looked-up rows ``[B, T, C]`` and the weight itself (a view) for the
    output layer. Backward gets both gradients at once and adds the rows' gradients into the
    output layer's ``[V_padded, C]`` weight gradient in place (``index_add_``). Through
    ``nn.Embedding`` the lookup's gradient is a zero-filled ``[V_padded, C]`` tensor of its
    own (154 MB at the 124M shape: fresh pages on every step), which autograd then adds to
    the output layer's: that fill and that add are what this node saves. Same sum, so the
    gradient agrees with the two-node form to float rounding (the rows are added in another
    order).
    """

    @staticmethod
    def forward(ctx, weight, idx):
        ctx.save_for_backward(idx)
        ctx.set_materialize_grads(False)
        ctx.weight_meta = weight.shape, weight.dtype
        return F.embedding(idx, weight), weight.view_as(weight)

    @staticmethod
    def backward(ctx, grad_rows, grad_weight):
        if not ctx.needs_input_grad[0]:
            return None, None
        (idx,) = ctx.saved_tensors
        if grad_weight is None:  # the output layer took no part in the loss
            shape, dtype = ctx.weight_meta
            grad_weight = torch.zeros(shape, dtype=dtype, device=idx.device)
        elif not grad_weight.is_contiguous():  # not the fused loss's own buffer: add into a copy
            grad_weight = grad_weight.contiguous()
        if grad_rows is not None:
            grad_weight.index_add_(0, idx.reshape(-1), grad_rows.reshape(-1, grad_rows.shape[-1]).to(grad_weight.dtype))
        return grad_weight, None


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, channels (n_embd)
        qkv = self.c_attn(x)  # (B, T, 3C)
        qkv = qkv.view(B, T, 3, self.n_head, C // self.n_head)  # (B, T, 3, nh, hs)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, nh, T, hs)
        # softmax(q k^T / sqrt(hs)) v over earlier positions only: (B, nh, T, T) x (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, nh, hs) -> (B, T, C): the heads side by side
        return _dropout(self.c_proj(y), self.dropout, self.training)  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, MLP_RATIO * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(MLP_RATIO * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # GPT-1 section 4.1 / GPT-2: GELU in its tanh approximation (HF "gelu_new")
        h = F.gelu(self.c_fc(x), approximate="tanh")  # (B, T, C) -> (B, T, 4C)
        return _dropout(self.c_proj(h), self.dropout, self.training)  # (B, T, 4C) -> (B, T, C)


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


class GPT(nn.Module):
    def __init__(self, config: GPTConfig, loss_impl: str = "chunked"):
        super().__init__()
        if loss_impl not in LOSSES:
            raise ValueError(f"loss_impl must be one of {', '.join(LOSSES)}, got {loss_impl!r}")
        self.config = config
        self.loss_impl = loss_impl  # a key of model.fused_loss.LOSSES: the one loss path of forward
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
        return self._hidden_states(idx, tied=False)[0]

    def _hidden_states(self, idx: torch.Tensor, tied: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(hidden states, None)``; with ``tied``, ``(hidden states, the output layer's weight)``
        through ``_TiedTokenEmbedding``, whose backward sums the two uses' gradients in place."""
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
        pos = torch.arange(T, device=idx.device)  # (T,)
        if tied:
            tok_emb, output_weight = _TiedTokenEmbedding.apply(self.transformer.wte.weight, idx)  # (B, T, C), (Vp, C)
        else:
            tok_emb, output_weight = self.transformer.wte(idx), None  # (B, T, C)
        pos_emb = self.transformer.wpe(pos)  # (T, C), broadcast over the batch
        x = _dropout(tok_emb + pos_emb, self.config.dropout, self.training)  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)  # (B, T, C)
        if "ln_f" in self.transformer:
            x = self.transformer.ln_f(x)
        return x, output_weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, ignore_index: int = -1,
                return_logits: bool = True) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(logits [B, T, vocab_size] float, mean cross-entropy or None)``.

        Targets equal to ``ignore_index`` are not scored. With ``return_logits=False`` and
        targets, the logits are not formed (``None``): the loss comes from the fused chunked
        projection + cross-entropy, the fast and memory-light way to train.
        """
        if targets is not None and targets.shape != idx.shape:
            raise ValueError(f"targets shape {tuple(targets.shape)} differs from idx shape {tuple(idx.shape)}")
        tied = targets is not None and not return_logits and self.sums_tied_gradients(idx)
        x, output_weight = self._hidden_states(idx, tied)  # (B, T, C); (Vp, C) when tied
        logits = F.linear(x, self.output_weight).float() if return_logits or targets is None else None  # (B, T, V)
        loss = None
        if targets is not None:  # (B*T, C) x (Vp, C) against (B*T,); the padding rows never scored
            weight = self.transformer.wte.weight if output_weight is None else output_weight
            loss = LOSSES[self.loss_impl](x.reshape(-1, x.shape[-1]), weight, targets.reshape(-1),
                                          ignore_index=ignore_index, vocab_size=self.config.vocab_size)
        return logits, loss

    def sums_tied_gradients(self, idx: torch.Tensor) -> bool:
        """Whether a training forward takes the token lookup and the output layer's weight from
        one node (``_TiedTokenEmbedding``), so the tied weight's two gradients are summed without
        a dense one of the lookup's: CPU training through the chunked loss, not under compile.
        ``benchmarks/train_step.py --tied-grad two-nodes`` overrides it to compare."""
        return (self.loss_impl == "chunked" and idx.device.type == "cpu" and torch.is_grad_enabled()
                and self.transformer.wte.weight.requires_grad and not torch.compiler.is_compiling())

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
    Used by ``GPT.decode``; ``model/eval/decoding.py`` drives it."""

    def __init__(self, config: GPTConfig, batch: int, length: int, device=None, dtype=torch.float32):
        if length > config.block_size:
            raise ValueError(f"a cache of {length} positions is longer than the model's context "
                             f"(block_size={config.block_size})")
        self.kv = torch.zeros((config.n_layer, 2, batch, config.n_head, length, config.head_dim), device=device,
                              dtype=dtype)  # (L, k/v, B, nh, S, hs)
        self.valid = torch.zeros((batch, length), dtype=torch.bool, device=device)
        self.filled = 0  # slots written so far

    @property
    def length(self) -> int:
        return self.kv.shape[-2]


def _cached_attention(attn: CausalSelfAttention, x: torch.Tensor, kv: torch.Tensor, start: int,
                      mask: torch.Tensor) -> torch.Tensor:
    """``attn(x)`` for new positions ``start..start+T`` of the cache, their keys/values stored in ``kv`` ``(2, B, nh, S, hs)``."""
    B, T, C = x.shape  # the new positions only
    qkv = attn.c_attn(x).view(B, T, 3, attn.n_head, C // attn.n_head)  # (B, T, 3C) -> (B, T, 3, nh, hs)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, nh, T, hs)
    kv[0, :, :, start:start + T] = k  # keys of slots start..start+T: (B, nh, T, hs)
    kv[1, :, :, start:start + T] = v
    # every new query against all start + T cached slots: mask (B, 1, T, start + T)
    y = F.scaled_dot_product_attention(q, kv[0, :, :, :start + T], kv[1, :, :, :start + T], attn_mask=mask)  # (B, nh, T, hs)
    return attn.c_proj(y.transpose(1, 2).reshape(B, T, C))  # (B, T, nh, hs) -> (B, T, C)


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
    pos = (seen.long().cumsum(dim=1) - 1).clamp(min=0)[:, start:]  # (B, T)
    slots = torch.arange(start + T, device=idx.device)
    causal = slots[None, :] <= slots[start:, None]  # (T, S): new position t sees slots up to its own
    # a padding query attends to itself alone (its output is never used; a row of -inf would give NaN)
    mask = (causal[None] & seen[:, None, :]) | (slots[None, None, :] == slots[start:, None][None])
    x = model.transformer.wte(idx) + model.transformer.wpe(pos)  # (B, T, C): each row's own positions
    for layer, block in enumerate(model.transformer.h):
        x = _cached_block(block, x, cache.kv[layer], start, mask[:, None])  # mask (B, 1, T, S) for every head
    if "ln_f" in model.transformer:
        x = model.transformer.ln_f(x[:, -1:])  # (B, 1, C): only the last position is scored
    cache.filled = start + T
    return F.linear(x[:, -1], model.output_weight).float()  # (B, C) -> (B, V)
