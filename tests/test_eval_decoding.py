"""model.eval.decoding: KV-cached batched decoding against the full forward pass and against
``transformers``' ``generate`` on the same weights (greedy and seeded top-k, token for token),
the stop rules, and the left truncation that keeps the task prompt."""

from __future__ import annotations

import pytest
import torch

from model.eval.decoding import (
    Decoding,
    GenerationError,
    StopRule,
    answer_logprob,
    fit_prompt,
    generate_batch,
    generate_texts,
)
from model.gpt import GPT, GPTConfig, KVCache, decode
from model.hf import save_hf_dir

torch.set_num_threads(1)


def _gpt(arch="gpt2", vocab=97, block=64, seed=0):
    torch.manual_seed(seed)
    gpt = GPT(GPTConfig(arch=arch, n_layer=2, n_head=4, n_embd=32, block_size=block, vocab_size=vocab)).eval()
    with torch.no_grad():  # larger weights than N(0, 0.02): varied continuations, argmax far from ties
        gpt.transformer.wte.weight[:vocab].mul_(4)
        for name, weight in gpt.named_parameters():
            if weight.dim() == 2 and not name.startswith(("transformer.wte", "transformer.wpe")):
                weight.mul_(10)
    return gpt


@pytest.mark.parametrize("arch", ["gpt2", "gpt1"])
def test_cached_decoding_gives_the_full_forward_logits_for_left_padded_rows(arch):
    gpt = _gpt(arch)
    rows = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    cache = KVCache(gpt.config, 2, 10)
    idx = torch.tensor([rows[0], [0, 0, 0, *rows[1]]])
    valid = torch.tensor([[True] * 6, [False] * 3 + [True] * 3])
    first = decode(gpt, idx, cache, valid)
    second = decode(gpt, torch.tensor([[20], [21]]), cache)
    with torch.no_grad():
        for row, (prompt, new) in enumerate(zip(rows, (20, 21), strict=True)):
            full, _ = gpt(torch.tensor([prompt + [new]]))
            assert torch.allclose(first[row], full[0, -2], atol=1e-4)
            assert torch.allclose(second[row], full[0, -1], atol=1e-4)
    assert cache.filled == 7


def _hf_generate(transformers, folder, prompts, new, **kwargs):
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    longest = max(map(len, prompts))
    ids = torch.tensor([[0] * (longest - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts])
    out = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, pad_token_id=0,
                      eos_token_id=None, **kwargs)
    return out[:, longest:].tolist()


def test_greedy_and_seeded_top_k_match_transformers_generate_token_for_token(tmp_path):
    transformers = pytest.importorskip("transformers")
    gpt = _gpt()
    save_hf_dir(gpt, tmp_path / "hf")
    prompts = [[3, 14, 15, 92, 65], [35, 89, 79, 32, 38, 46, 26, 43], [2, 71]]
    ours = [g.tokens for g in generate_batch(gpt, prompts, 12)]
    theirs = _hf_generate(transformers, tmp_path / "hf", prompts, 12, do_sample=False)
    assert ours == theirs and all(len(set(row)) > 3 for row in ours)
    torch.manual_seed(1234)
    theirs = _hf_generate(transformers, tmp_path / "hf", prompts, 12, do_sample=True, top_k=5, top_p=1.0,
                          temperature=1.0)
    ours = [g.tokens for g in generate_batch(gpt, prompts, 12, top_k=5, generator=torch.Generator().manual_seed(1234))]
    assert ours == theirs
    again = [g.tokens for g in generate_batch(gpt, prompts, 12, top_k=5, generator=torch.Generator().manual_seed(1234))]
    other = [g.tokens for g in generate_batch(gpt, prompts, 12, top_k=5, generator=torch.Generator().manual_seed(99))]
    assert again == ours and other != ours


def test_a_row_decodes_in_a_batch_as_it_does_alone_and_logprobs_are_the_models():
    gpt = _gpt()
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8, 9], [40, 41], [60, 61, 62, 63]]
    batch = generate_batch(gpt, prompts, 6)
    for prompt, got in zip(prompts, batch, strict=True):
        alone = generate_batch(gpt, [prompt], 6)[0]
        assert got.tokens == alone.tokens
        with torch.no_grad():
            logits, _ = gpt(torch.tensor([prompt + got.tokens]))
        expected = torch.log_softmax(logits[0, len(prompt) - 1:-1], -1).gather(1, torch.tensor(got.tokens)[:, None])
        assert torch.allclose(torch.tensor(got.logprobs), expected.squeeze(1), atol=1e-4)


def test_end_of_text_and_a_stop_rule_end_a_row_early():
    gpt = _gpt()
    prompt = [[7, 8, 9]]
    free = generate_batch(gpt, prompt, 8)[0].tokens
    cut_at = free[2]
    stopped = generate_batch(gpt, prompt, 8, eot_id=cut_at)[0].tokens
    assert stopped == free[:free.index(cut_at)]
    early = generate_batch(gpt, prompt, 8, stopped=lambda row, tokens: len(tokens) == 3)[0].tokens
    assert early == free[:3]


def test_fit_prompt_cuts_the_body_from_the_left_and_keeps_the_task_prompt():
    assert fit_prompt([1, 2, 3], [9], 10) == ([1, 2, 3, 9], False)
    assert fit_prompt(list(range(20)), [98, 99], 6) == ([16, 17, 18, 19, 98, 99], True)
    assert fit_prompt([1, 2], [7, 8, 9], 3) == ([7, 8, 9], True)
    assert fit_prompt([1], [1, 2, 3, 4], 3) == ([2, 3, 4], True)  # a prompt longer than the window: its end
    assert fit_prompt([], [5, 6], 2) == ([5, 6], False)
    gpt = _gpt(block=16)
    with pytest.raises(GenerationError, match="exceeds the model's context"):
        generate_batch(gpt, [list(range(1, 14))], 4)


def test_newline_and_token_stop_rules():
    rule = StopRule("newline")
    assert not rule.complete("\nParis") and rule.complete("\nParis\nQ:")
    assert rule.cut("\n Paris \nQ: next") == "Paris"
    assert StopRule("tokens").cut("  a b  ") == "a b" and not StopRule("tokens").complete("a.\nb.")
    with pytest.raises(GenerationError):
        StopRule("paragraph")


@pytest.mark.usefixtures("needs_punkt")
def test_sentence_stop_rules():
    first = StopRule("sentences", 1)
    assert not first.complete(" Le chat est noir") and first.complete(" Le chat est noir. Le chien")
    assert first.cut(" Le chat est noir. Le chien dort.") == "Le chat est noir."
    three = StopRule("sentences", 3)
    assert three.cut("One here. Two there. Three now. Four later.") == "One here. Two there. Three now."
    assert not three.complete("One here. Two there.") and three.complete("One here. Two there. Three now. Fo")


def test_generate_texts_fits_long_prompts_and_reports_the_answer(tmp_path):
    from model.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(["the cat sat on the mat. A: yes\n", "a dog ran far away. Q: where?\n"] * 20,
                                vocab_size=300, show_progress=False)
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=32, vocab_size=tokenizer.vocab_size)).eval()
    prompts = [("the cat sat on the mat. " * 30, "\nA:"), ("a dog ran", "\nA:")]
    got, cut = generate_texts(gpt, tokenizer, prompts, Decoding(8, StopRule("newline")), batch_size=2)
    assert cut == 1 and len(got) == 2
    for g in got:
        assert g.text == tokenizer.decode(g.tokens) and g.answer == StopRule("newline").cut(g.text)
        assert answer_logprob(tokenizer, g) <= 0
    sampled = generate_texts(gpt, tokenizer, prompts, Decoding(8, StopRule("tokens"), top_k=3, seed=5))[0]
    assert [g.tokens for g in sampled] == [g.tokens for g in generate_texts(
        gpt, tokenizer, prompts, Decoding(8, StopRule("tokens"), top_k=3, seed=5))[0]]
