"""model/gpt.py: shapes, causality, block order, sizes, initialisation, the loss and its fused form
(``tests/test_fused_loss.py`` checks ``linear_cross_entropy`` itself)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from model.gpt import GPT, GPTConfig, _TiedTokenEmbedding
from model.shapes import meta_gpt

TINY = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=97)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(arch="gpt2", seed=0, **overrides) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(arch=arch, **{**TINY, **overrides})).eval()
    with torch.no_grad():  # non-trivial layer-norm gains and biases, so that their placement matters
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model


def tokens(batch=3, time=16, vocab=97, seed=1):
    return torch.randint(0, vocab, (batch, time), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_shapes_and_dtypes(arch):
    model = tiny(arch)
    x = tokens()
    logits, loss = model(x)
    assert logits.shape == (3, 16, 97) and logits.dtype == torch.float32 and loss is None
    logits, loss = model(x[:, :5], x[:, 1:6])
    assert logits.shape == (3, 5, 97) and loss.shape == () and math.isfinite(loss.item())
    assert model.config.padded_vocab_size == 128
    assert model.transformer.wte.weight.shape == (128, 32)


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_causal_later_tokens_never_change_earlier_logits(arch):
    model = tiny(arch)
    x = tokens(batch=1)
    base = model(x)[0]
    for t in (3, 9, 15):
        changed = x.clone()
        changed[0, t] = (changed[0, t] + 1) % 97
        out = model(changed)[0]
        assert torch.equal(out[0, :t], base[0, :t])
        assert not torch.allclose(out[0, t], base[0, t])  # the changed position itself does move


def test_attention_matches_explicit_masked_softmax():
    model = tiny()
    attn = model.transformer.h[0].attn
    x = torch.randn(2, 7, 32)
    q, k, v = attn.c_attn(x).split(32, dim=2)
    heads = lambda t: t.view(2, 7, 2, 16).transpose(1, 2)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(16)
    scores = scores.masked_fill(torch.triu(torch.ones(7, 7, dtype=torch.bool), 1), float("-inf"))
    expected = attn.c_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 7, 32))
    torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_block_order_is_pre_ln_for_gpt2_and_post_ln_for_gpt1(arch):
    model = tiny(arch)
    block = model.transformer.h[0]
    x = torch.randn(2, 5, 32)
    if arch == "gpt2":
        h = x + block.attn(block.ln_1(x))
        expected = h + block.mlp(block.ln_2(h))
    else:
        h = block.ln_1(x + block.attn(x))
        expected = block.ln_2(h + block.mlp(h))
    torch.testing.assert_close(block(x), expected, atol=1e-6, rtol=1e-6)
    assert ("ln_f" in model.transformer) == (arch == "gpt2")


def test_gpt1_and_gpt2_differ_on_the_same_weights():
    gpt2, gpt1 = tiny("gpt2"), tiny("gpt1")
    state = {k: v for k, v in gpt2.state_dict().items() if not k.startswith("transformer.ln_f")}
    gpt1.load_state_dict(state)
    x = tokens()
    assert (gpt1(x)[0] - gpt2(x)[0]).abs().max() > 1e-2


def test_longer_than_block_size_is_refused():
    model = tiny()
    with pytest.raises(ValueError, match="block_size=16"):
        model(tokens(time=17))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.tensor([[0, 97]]))
    with pytest.raises(ValueError, match="targets shape"):
        model(tokens(time=4), tokens(time=5))


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_loss_is_cross_entropy_of_the_logits(arch):
    model = tiny(arch)
    x, y = tokens(), tokens(seed=2)
    y[0, :4] = -1
    logits, loss = model(x, y)
    # one loss path (the fused one) whether or not the logits are asked for: equal to float rounding
    torch.testing.assert_close(loss, F.cross_entropy(logits.view(-1, 97), y.view(-1), ignore_index=-1), atol=1e-6, rtol=1e-6)
    y100 = y.masked_fill(y == -1, -100)
    assert torch.allclose(model(x, y100, ignore_index=-100)[1], loss)


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_fused_loss_gives_the_same_loss_and_gradients(arch):
    model = tiny(arch).train()
    x, y = tokens(), tokens(seed=2)
    y[1, 5:] = -1
    logits, loss = model(x, y)
    loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    none, fused = model(x, y, return_logits=False)
    (2.5 * fused).backward()  # a non-unit incoming gradient goes through the scaled path
    assert none is None
    torch.testing.assert_close(fused, loss, atol=1e-6, rtol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, 2.5 * reference[name], atol=1e-6, rtol=1e-5, msg=name)
    assert not model.transformer.wte.weight.grad[97:].any()  # padding rows get no gradient


@pytest.mark.parametrize("impl", ["full", "chunked"])
def test_loss_paths_agree_and_never_score_padding_rows(impl):
    torch.manual_seed(5)
    config = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=97)  # padded to 128 rows
    model = GPT(config)
    idx, y = torch.randint(0, 97, (3, 8)), torch.randint(0, 97, (3, 8))
    y[0, 0] = -1
    logits, expected = model(idx, y)
    expected_grad = torch.autograd.grad(expected, model.transformer.wte.weight)[0]
    model.loss_impl = impl
    none, loss = model(idx, y, return_logits=False)
    assert none is None and logits.shape[-1] == 97
    torch.testing.assert_close(loss, expected)
    loss.backward()
    grad = model.transformer.wte.weight.grad
    torch.testing.assert_close(grad, expected_grad)
    assert grad.shape[0] == 128 and not grad[97:].any()  # the padding rows are never predicted


def test_the_tied_embeddings_gradients_are_summed_in_place_without_a_dense_one_of_the_lookups(monkeypatch):
    """CPU training through the fused loss: the token lookup's rows go into the output layer's
    weight gradient (``_TiedTokenEmbedding``), the same sum as nn.Embedding's own backward, with
    no zero-filled ``[V_padded, C]`` gradient of the lookup's, across accumulated micro-steps too."""
    torch.manual_seed(2)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=300))  # 320 rows
    batches = [(torch.randint(0, 300, (2, 16)), torch.randint(0, 300, (2, 16))) for _ in range(2)]
    batches[0][0][0, :4] = 7  # a token looked up several times: its rows are summed
    summed = GPT.sums_tied_gradients  # False: nn.Embedding's own backward, the two-node form

    def grads(in_place: bool) -> dict:
        monkeypatch.setattr(GPT, "sums_tied_gradients", lambda self, idx: in_place and summed(self, idx))
        model.zero_grad(set_to_none=True)
        for idx, y in batches:  # two micro-steps into the same .grad
            model(idx, y, return_logits=False)[1].backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    two_nodes, tied = grads(False), grads(True)
    for name in two_nodes:
        torch.testing.assert_close(tied[name], two_nodes[name], atol=1e-7, rtol=1e-6, msg=name)
    assert tied["transformer.wte.weight"][7].abs().sum() > 0 and not tied["transformer.wte.weight"][300:].any()

    def zero_filled_shapes(in_place: bool) -> list:
        monkeypatch.setattr(GPT, "sums_tied_gradients", lambda self, idx: in_place and summed(self, idx))
        loss = model(*batches[0], return_logits=False)[1]
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            loss.backward()
        return [e.input_shapes[0] for e in prof.events() if e.name in ("aten::fill_", "aten::zero_")]

    assert [320, 32] in zero_filled_shapes(False)  # nn.Embedding's backward: a dense zero gradient
    assert [320, 32] not in zero_filled_shapes(True)


def test_the_tied_lookup_node_alone_gives_each_outputs_gradient():
    weight = torch.randn(10, 4, requires_grad=True)
    idx = torch.tensor([[1, 3, 3, 9]])
    rows, out_weight = _TiedTokenEmbedding.apply(weight, idx)
    torch.testing.assert_close(rows, F.embedding(idx, weight))
    assert out_weight.data_ptr() == weight.data_ptr()
    (rows * 2).sum().backward()  # the output weight unused: the lookup's rows alone
    expected = torch.zeros(10, 4)
    expected[1], expected[3], expected[9] = 2, 4, 2
    torch.testing.assert_close(weight.grad, expected)
    weight.grad = None
    rows, out_weight = _TiedTokenEmbedding.apply(weight, idx)
    (out_weight[::2] * 3).sum().backward()  # the lookup unused
    expected = torch.zeros(10, 4)
    expected[::2] = 3
    torch.testing.assert_close(weight.grad, expected)
    weight.grad = None
    rows, out_weight = _TiedTokenEmbedding.apply(weight, idx)
    (out_weight.sum() + rows.sum()).backward()  # an expanded (stride 0) gradient: added into a copy
    expected = torch.ones(10, 4)
    expected[1] += 1
    expected[3] += 2
    expected[9] += 1
    torch.testing.assert_close(weight.grad, expected)


def test_bf16_autocast_loss_matches_standard_path():
    model = tiny()
    x, y = tokens(), tokens(seed=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(x, y)
        _, fused = model(x, y, return_logits=False)
    assert logits.dtype == torch.float32 and fused.dtype == torch.float32
    assert abs(fused.item() - loss.item()) < 1e-3


# GPT-2 sizes from the spec's table; 124M is exact, the others are the paper's rounded counts.
@pytest.mark.parametrize("name,aliases,approx", [
    ("gpt2", ["124M", "117M", "GPT2"], 124_439_808),
    ("gpt2-medium", ["345M", "350M"], 355e6),
    ("gpt2-large", ["762M", "774M"], 774e6),
    ("gpt2-xl", ["1542M", "1558M"], 1558e6),
])
def test_named_sizes_and_parameter_counts(name, aliases, approx):
    config = GPTConfig.named(name)
    for alias in aliases:
        assert GPTConfig.named(alias) == config
    model = meta_gpt(config)  # shapes only: nothing allocated
    C, L, T, V = config.n_embd, config.n_layer, config.block_size, config.vocab_size
    # per block: 2 layer norms (4C), qkv (3C^2 + 3C), attn proj (C^2 + C), mlp (8C^2 + 5C)
    formula = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    assert model.num_parameters() == formula
    assert model.num_parameters() == pytest.approx(approx, rel=2e-3)
    assert model.num_parameters(exclude_embeddings=True) == formula - T * C
    assert config.padded_vocab_size == 50304 and config.vocab_size == 50257


def test_124m_exact_count_and_flops_per_token():
    model = meta_gpt(GPTConfig.named("124M"))
    assert model.num_parameters() == 124_439_808
    # spec: 855 MFLOP/token for 124M at T=1024 (6N + 12LCT with N excluding position embeddings)
    assert model.flops_per_token() == 6 * (124_439_808 - 1024 * 768) + 12 * 12 * 768 * 1024
    assert round(model.flops_per_token(1024) / 1e6) == 855
    assert model.flops_per_token(512) < model.flops_per_token(1024)


def test_gpt1_named_config():
    config = GPTConfig.named("gpt1")
    assert (config.arch, config.n_layer, config.n_embd, config.n_head, config.block_size, config.dropout) == \
        ("gpt1", 12, 768, 12, 512, 0.1)
    assert GPTConfig.named("gpt1", vocab_size=40478).vocab_size == 40478


def test_config_errors_and_round_trip():
    with pytest.raises(ValueError, match="gpt2-medium"):  # the message lists the known names
        GPTConfig.named("gpt3")
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=100, n_head=12)
    with pytest.raises(ValueError, match="arch"):
        GPTConfig(arch="bert")
    with pytest.raises(ValueError, match="unknown GPTConfig field"):
        GPTConfig.from_dict({"n_layers": 3})
    config = GPTConfig.named("gpt2-large", vocab_size=32000, dropout=0.1)
    assert GPTConfig.from_dict(config.to_dict()) == config
    assert config.padded_vocab_size == 32000


def test_initialisation():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=8, n_head=4, n_embd=128, block_size=16, vocab_size=1000))
    residual = 0.02 / math.sqrt(2 * 8)
    assert model.transformer.h[0].attn.c_proj.weight.std().item() == pytest.approx(residual, rel=0.05)
    assert model.transformer.h[3].mlp.c_proj.weight.std().item() == pytest.approx(residual, rel=0.05)
    assert model.transformer.h[0].attn.c_attn.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.transformer.wte.weight[:1000].std().item() == pytest.approx(0.02, rel=0.05)
    assert not model.transformer.wte.weight[1000:].any()
    assert not model.transformer.h[0].mlp.c_fc.bias.any()
    gpt1 = GPT(GPTConfig(arch="gpt1", n_layer=8, n_head=4, n_embd=128, block_size=16, vocab_size=1000))
    assert gpt1.transformer.h[0].attn.c_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_dropout_only_in_training():
    model = tiny(dropout=0.3)
    x = tokens()
    model.eval()
    assert torch.equal(model(x)[0], model(x)[0])
    model.train()
    torch.manual_seed(5)
    a = model(x)[0]
    b = model(x)[0]
    assert not torch.equal(a, b)


def test_a_loss_path_that_does_not_exist_is_refused_by_name():
    config = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=97)
    with pytest.raises(ValueError, match="loss_impl must be one of chunked, full, got 'fused'"):
        GPT(config, loss_impl="fused")
    assert GPT(config, loss_impl="full").loss_impl == "full"
