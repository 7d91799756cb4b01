"""model.eval.scoring: windowed token NLLs, the perplexity bookkeeping, LAMBADA / CBT / WSC protocols."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import transformers  # its model classes load on first use (a few CPU-seconds), only in the test that builds one

from dedup.benchmark_sets import load_benchmark, load_wsc
from model.eval.detokenize import count_bytes, count_chars, count_words, detokenize, detokenizer_for
from model.eval.metrics import compute_metric
from model.eval.scoring import (
    STOPWORDS,
    TABLE3,
    TABLE3_COLUMNS,
    ScoringModel,
    cbt_prompt,
    evaluate_benchmark,
    example_offsets,
    split_last_word,
    wsc_option,
    wsc_prompts,
)
from model.gpt import GPT, GPTConfig
from model.hf import hf_config_dict, to_hf_state_dict
from model.tokenizer import train_tokenizer

torch.set_num_threads(1)

CORPUS = [
    "the dog saw the cat. the cat saw the dog. a zebra ran to the dog and the cat.",
    "Mary told John that the house was red , and he said it was blue .",
    "In 1999 the river rose 3 @.@ 5 metres ; the town of Kingsbridge was flooded .",
    "= Valkyria Chronicles III =\nSenjō no Valkyria 3 : Unrecorded Chronicles is a tactical role @-@ playing game .",
] * 20


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(CORPUS, vocab_size=400, min_frequency=1, show_progress=False)


def tiny_gpt(tok, block_size=16, seed=0, arch="gpt2"):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(arch=arch, n_layer=2, n_head=2, n_embd=32, block_size=block_size, vocab_size=tok.vocab_size))
    # larger weights than the N(0, 0.02) init, so that predictions depend visibly on the context
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    return model.eval()


class Bigram(torch.nn.Module):
    """A real language model with known log-probabilities: the next token depends on the last one only."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table.clone())

    def forward(self, idx):
        return self.table[idx]


def bigram_nll(table: torch.Tensor, eot: int, ids: list[int]) -> np.ndarray:
    prev = [eot, *ids[:-1]]
    logp = torch.log_softmax(table.double(), dim=-1)
    return np.array([-float(logp[p, t]) for p, t in zip(prev, ids, strict=True)])


# ----------------------------------------------------------------------------- windows and token NLLs

@pytest.mark.parametrize("n,context,stride", [(1, 8, 8), (8, 8, 8), (9, 8, 8), (50, 8, 8), (50, 8, 3), (50, 8, 1),
                                              (17, 16, 5), (100, 16, 16)])
def test_windows_score_every_token_once_within_the_context(tok, n, context, stride):
    sm = ScoringModel(Bigram(torch.zeros(tok.vocab_size, tok.vocab_size)), tok, context_length=context)
    windows = sm.windows(n, stride)
    scored = np.concatenate([np.arange(first, end) for _, end, first in windows])
    assert scored.tolist() == list(range(n))  # each token once, in order
    for k, (start, end, first) in enumerate(windows):
        assert 0 <= start <= first < end <= n and end - start <= context
        if k:  # after the first window: full context whenever the text allows it, at least C - S + 1 tokens
            assert end - start == min(context, end)
            assert first - start + 1 >= min(context - stride + 1, first + 1)


def test_token_nlls_of_a_known_model_equal_the_direct_computation(tok):
    g = torch.Generator().manual_seed(1)
    table = torch.randn(tok.vocab_size, tok.vocab_size, generator=g) * 3
    sm = ScoringModel(Bigram(table), tok, context_length=8, batch_size=3)
    ids = tok.encode(" ".join(CORPUS[:4]))[:70]
    expected = bigram_nll(table, tok.eot_id, ids)
    for stride in (1, 3, 7, 8):  # a bigram model sees one token back: the windowing cannot change its NLLs
        got = sm.token_nlls(ids, stride=stride)
        assert got.shape == (len(ids),)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert sm.token_nlls([]).shape == (0,)


def _direct_window_nll(model, seq, start, j):
    """NLL of seq[j + 1] given exactly seq[start:j + 1], from one plain forward pass."""
    with torch.no_grad():
        logits, _ = model(torch.tensor([seq[start:j + 1]]))
    return -float(torch.log_softmax(logits[0, -1].double(), dim=-1)[seq[j + 1]])


@pytest.mark.parametrize("stride", [16, 8, 5, 1])
def test_each_token_gets_the_context_its_window_gives_it(tok, stride):
    model = tiny_gpt(tok, block_size=16)
    sm = ScoringModel(model, tok, batch_size=4)
    ids = tok.encode(CORPUS[0] + " " + CORPUS[1])[:45]
    seq = [tok.eot_id, *ids]
    got = sm.token_nlls(ids, stride=stride)
    C, ends = 16, []
    end = min(C, len(ids))
    ends.append(end)
    while end < len(ids):
        end = min(end + stride, len(ids))
        ends.append(end)
    for j in range(len(ids)):
        window_end = next(e for e in ends if e > j)
        start = max(0, window_end - C)
        assert got[j] == pytest.approx(_direct_window_nll(model, seq, start, j), abs=2e-5)


def test_stride_changes_only_the_context(tok):
    model = tiny_gpt(tok, block_size=16)
    sm = ScoringModel(model, tok, batch_size=8)
    ids = tok.encode(" ".join(CORPUS[:3]))[:60]
    seq = [tok.eot_id, *ids]
    disjoint = sm.token_nlls(ids, stride=16)
    overlapping = sm.token_nlls(ids, stride=4)
    assert len(disjoint) == len(overlapping) == len(ids)
    # the first window is the same; token 16 opens the second disjoint window with one token of context
    np.testing.assert_allclose(disjoint[:16], overlapping[:16], atol=1e-6)
    assert disjoint[16] == pytest.approx(_direct_window_nll(model, seq, 16, 16), abs=2e-5)
    assert abs(disjoint[16] - overlapping[16]) > 1e-4
    assert abs(disjoint.sum() - overlapping.sum()) > 1e-3


def test_gpt_hf_and_plain_logits_paths_agree(tok):
    model = tiny_gpt(tok, block_size=16)
    ids = tok.encode(" ".join(CORPUS[:2]))[:40]
    ours = ScoringModel(model, tok, batch_size=2).token_nlls(ids, stride=5)

    class LogitsOnly(torch.nn.Module):  # no hidden-state access: scored from forward's logits
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, idx):
            return self.inner(idx)

    plain = ScoringModel(LogitsOnly(model), tok, context_length=16, batch_size=3).token_nlls(ids, stride=5)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**{k: v for k, v in hf_config_dict(model.config).items()
                                                                 if k not in ("architectures", "torch_dtype", "dtype")}))
    hf.load_state_dict(to_hf_state_dict(model), strict=False)
    via_hf = ScoringModel(hf, tok, batch_size=8).token_nlls(ids, stride=5)
    np.testing.assert_allclose(plain, ours, atol=1e-5)
    np.testing.assert_allclose(via_hf, ours, atol=1e-4)


def test_autocast_dtype_and_batch_size_keep_the_scores(tok):
    model = tiny_gpt(tok, block_size=16)
    ids = tok.encode(" ".join(CORPUS[:2]))[:40]
    fp32 = ScoringModel(model, tok, batch_size=8).token_nlls(ids, stride=4)
    one = ScoringModel(model, tok, batch_size=1).token_nlls(ids, stride=4)
    bf16 = ScoringModel(model, tok, batch_size=8, dtype=torch.bfloat16).token_nlls(ids, stride=4)
    np.testing.assert_allclose(one, fp32, atol=1e-5)
    assert bf16.dtype == np.float64 and np.abs(bf16 - fp32).max() < 0.2 and np.abs(bf16 - fp32).max() > 0


def test_bad_settings_are_refused_with_a_message(tok):
    model = tiny_gpt(tok, block_size=16)
    with pytest.raises(ValueError, match="exceeds the model's context"):
        ScoringModel(model, tok, context_length=32)
    with pytest.raises(ValueError, match="batch_size"):
        ScoringModel(model, tok, batch_size=0)
    sm = ScoringModel(model, tok)
    for stride in (0, 17, 2.5):
        with pytest.raises(ValueError, match="stride"):
            sm.token_nlls([1, 2, 3], stride=stride)
    with pytest.raises(ValueError, match="context_length"):
        ScoringModel(Bigram(torch.zeros(4, 4)), tok)


# ----------------------------------------------------------------------------- language-modelling sets

WIKI_LINES = ["", "= Alpha =", "", "The river rose 3 @.@ 5 metres in 1999 .",
              "It flooded the town of Kingsbridge , and the dog saw the cat .", "", "= = Aftermath = =", "",
              "Mary told John that the house was red .", "", "= Beta =", "",
              "Senjō no Valkyria 3 : Unrecorded Chronicles is a tactical role @-@ playing game .", "", "= Gamma =",
              "", "the dog saw the cat ."]
WIKI = "".join(f" {line} \n" if line else " \n" for line in WIKI_LINES)  # the files' layout: a space at each line edge


def test_perplexity_examples_sum_to_the_whole_text(tok, tmp_path):
    path = tmp_path / "wiki.test.raw"
    path.write_text(WIKI, encoding="utf-8")
    bench = load_benchmark(f"wikitext2:{path}")
    assert len(bench) == 3
    sm = ScoringModel(tiny_gpt(tok, block_size=16), tok, batch_size=4)
    result = evaluate_benchmark(sm, bench, stride=8, progress=False)
    assert [s.id for s in result.examples] == [e.id for e in bench.examples]
    assert result.metrics[0] == "word_ppl" and result.kind == "lm"
    kind = detokenizer_for("wikitext2")
    text = detokenize(WIKI, kind)
    ids = tok.encode(text)
    whole = sm.token_nlls(ids, stride=8)
    assert sum(s.tokens for s in result.examples) == len(ids) == result.meta["tokens_scored"]
    assert math.fsum(s.nll for s in result.examples) == pytest.approx(whole.sum(), rel=1e-9)
    assert sum(s.words for s in result.examples) == count_words(WIKI, kind)
    assert sum(s.bytes for s in result.examples) == count_bytes(WIKI)
    assert sum(s.chars for s in result.examples) == count_chars(WIKI)
    assert compute_metric(result.examples, "word_ppl") == pytest.approx(math.exp(whole.sum() / count_words(WIKI, kind)))
    assert compute_metric(result.examples, "bpb") == pytest.approx(whole.sum() / math.log(2) / count_bytes(WIKI))
    # the second article's tokens are exactly those starting on its lines of the detokenized text
    lines = text.split("\n")
    beta, gamma = WIKI_LINES.index("= Beta ="), WIKI_LINES.index("= Gamma =")
    second_start, third_start = len("\n".join(lines[:beta])) + 1, len("\n".join(lines[:gamma])) + 1
    assert text[second_start:].startswith("= Beta =")
    _, starts = tok.encode_with_offsets(text)
    in_second = [i for i, s in enumerate(starts) if second_start <= s < third_start]
    assert result.examples[1].tokens == len(in_second)
    assert result.examples[1].nll == pytest.approx(whole[in_second].sum(), rel=1e-9)
    assert result.examples[1].bytes == len("".join(f" {x} \n" if x else " \n"
                                                   for x in WIKI_LINES[beta:gamma]).encode())


def test_limit_scores_the_text_of_the_first_examples(tok, tmp_path):
    path = tmp_path / "ptb.test.txt"
    sentences = [" the dog saw the cat ", " mary told john that the house was red ", " a zebra ran to the dog "]
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    bench = load_benchmark(f"ptb:{path}")
    sm = ScoringModel(tiny_gpt(tok), tok)
    two = evaluate_benchmark(sm, bench, limit=2, detokenize=False, progress=False)
    assert len(two.examples) == 2
    text = "\n".join(sentences[:2]) + "\n"
    whole = sm.token_nlls(tok.encode(text))
    assert math.fsum(s.nll for s in two.examples) == pytest.approx(whole.sum(), rel=1e-9)
    assert sum(s.bytes for s in two.examples) == len(text.encode())


def test_documents_protocol_scores_each_example_from_the_start(tok, tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [{"text": "the dog saw the cat."}, {"text": "Mary told John that the house was red."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bench = load_benchmark(f"jsonl:{path}")
    assert bench.full_text is None
    sm = ScoringModel(tiny_gpt(tok), tok)
    result = evaluate_benchmark(sm, bench, progress=False)
    assert result.meta["protocol"] == "documents"
    for row, score in zip(rows, result.examples, strict=True):
        assert score.nll == pytest.approx(sm.token_nlls(tok.encode(row["text"])).sum(), rel=1e-6)
        assert score.bytes == len(row["text"].encode())


def test_example_offsets_find_paragraphs_and_chunks(tmp_path):
    path = tmp_path / "wiki.test.raw"
    path.write_text(WIKI, encoding="utf-8")
    paragraphs = load_benchmark(f"wikitext2:{path}:paragraph")
    lines, by_line = example_offsets(paragraphs)
    assert by_line and [WIKI.split("\n")[n].strip() for n in lines] == [e.text for e in paragraphs.examples]
    text8 = tmp_path / "text8"
    text8.write_text(" anarchism originated as a term of abuse first used against early working class", encoding="utf-8")
    bench = load_benchmark(f"text8:{text8}:4")
    offsets, by_line = example_offsets(bench)
    assert not by_line
    assert [bench.full_text[o:].split()[:4] for o in offsets] == [e.text.split() for e in bench.examples]


# ----------------------------------------------------------------------------- LAMBADA

def lambada_table(tok, rows: dict[str, dict[str, float]]) -> torch.Tensor:
    table = torch.zeros(tok.vocab_size, tok.vocab_size)
    for prev, nexts in rows.items():
        for nxt, value in nexts.items():
            table[tok.encode(prev)[-1], tok.encode(nxt)[0]] = value
    return table


def test_lambada_protocols_on_a_hand_checked_example(tok, tmp_path):
    for word in (" the", " cat", " dog", " saw"):
        assert len(tok.encode(word)) == 1, word  # precondition of the hand check: one token per word
    z = tok.encode(" zebra")
    assert len(z) >= 2
    V = tok.vocab_size
    table = lambada_table(tok, {" the": {" the": 5.0, " cat": 4.0}, " saw": {" dog": 6.0}})
    # " zebra": first piece not the top choice after " a", later pieces forced
    table[tok.encode(" a")[0], z[0]] = 1.0
    table[tok.encode(" a")[0], tok.encode(" dog")[0]] = 2.0
    for a, b in zip(z, z[1:], strict=False):
        table[a, b] = 9.0
    path = tmp_path / "lambada_test.jsonl"
    passages = ["the dog saw the cat", "the cat saw the dog saw", "the dog saw a zebra"]
    path.write_text("".join(json.dumps({"text": p}) + "\n" for p in passages), encoding="utf-8")
    bench = load_benchmark(f"lambada:{path}")
    sm = ScoringModel(Bigram(table), tok, context_length=64)
    result = evaluate_benchmark(sm, bench, detokenize=False, progress=False)
    cat, saw, zebra = result.examples
    # 1: after " the" the model prefers " the" (a stop word, e^5) over the target " cat" (e^4)
    assert cat.nll == pytest.approx(math.log(V - 2 + math.exp(5) + math.exp(4)) - 4, rel=1e-6)
    assert cat.correct == {"last_token": False, "whole_word": False, "stopword": True}
    assert cat.extra["target"] == "cat" and cat.extra["greedy"] == "the" and cat.extra["filtered_first"] == "cat"
    # 2: target " saw" after " dog": every continuation equally likely -> argmax is token 0, not " saw"
    assert saw.nll == pytest.approx(math.log(V), rel=1e-6)
    assert not any(saw.correct.values())
    # 3: multi-token word: the last piece is predicted, the first is not
    assert zebra.correct["last_token"] and not zebra.correct["whole_word"]
    expected = bigram_nll(table, tok.eot_id, tok.encode("the dog saw a zebra"))[-len(z):].sum()
    assert zebra.nll == pytest.approx(expected, rel=1e-6) and zebra.tokens == len(z) and zebra.words == 1
    assert result.metric("lastword_ppl") == pytest.approx(math.exp((cat.nll + saw.nll + zebra.nll) / 3))
    assert result.metric("acc:stopword") == pytest.approx(1 / 3) and result.metric("acc:whole_word") == 0.0


def test_split_last_word_and_stopwords():
    assert split_last_word("He handed her the  knife ") == ("He handed her the", "  knife")
    assert split_last_word("one") == ("", "one")
    with pytest.raises(ValueError):
        split_last_word("   ")
    assert len(STOPWORDS) == 179 and "the" in STOPWORDS and "cat" not in STOPWORDS


# ----------------------------------------------------------------------------- CBT

def cbt_file(tmp_path, answer="cat", candidates=("dog", "cat", "zebra", "house")):
    lines = [f"{n} the dog saw the cat ." for n in range(1, 21)]
    lines.append(f"21 the XXXXX saw the dog .\t{answer}\t\t{'|'.join(candidates)}")
    path = tmp_path / "cbtest_NE_test_2500ex.txt"
    path.write_text("\n".join(lines) + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cbt_picks_the_most_likely_filled_query(tok, tmp_path):
    bench = load_benchmark(f"cbt:{cbt_file(tmp_path)}")
    assert bench.name == "cbt-ne" and len(bench) == 2
    context, continuations = cbt_prompt(bench.examples[0])
    assert context.endswith("the dog saw the cat . the") and continuations[1] == " cat saw the dog ."
    g = torch.Generator().manual_seed(3)
    table = torch.randn(tok.vocab_size, tok.vocab_size, generator=g)
    sm = ScoringModel(Bigram(table), tok, context_length=512)
    result = evaluate_benchmark(sm, bench, detokenize=False, progress=False)
    assert result.metrics == ["acc:candidates"]
    ctx_ids = tok.encode(context)
    direct = []
    for cont in continuations:
        ids = ctx_ids + tok.encode(cont)
        direct.append(bigram_nll(table, tok.eot_id, ids)[len(ctx_ids):].sum())
    first = result.examples[0]
    np.testing.assert_allclose(first.extra["candidate_nll"], direct, atol=1e-3)
    best = ["dog", "cat", "zebra", "house"][int(np.argmin(direct))]
    assert first.extra["prediction"] == best
    assert first.correct == {"candidates": best == "cat"}
    assert first.nll == pytest.approx(direct[1], abs=1e-6)
    # make " cat" after " the" overwhelmingly likely: the model must now pick it
    table[tok.encode(" the")[0], tok.encode(" cat")[0]] = 50.0
    result = evaluate_benchmark(ScoringModel(Bigram(table), tok, context_length=512), bench, detokenize=False,
                                progress=False)
    assert result.metric("acc:candidates") == 1.0


# ----------------------------------------------------------------------------- WSC

WSC_XML = """<?xml version="1.0" encoding="ISO-8859-1"?>
<collection>
<schema>
<text><txt1>The city councilmen refused the demonstrators a permit because</txt1><pron>they</pron>
<txt2>feared violence.</txt2></text>
<quote><quote1></quote1><pron>they</pron><quote2>feared violence</quote2></quote>
<answers><answer>The city councilmen</answer><answer>The demonstrators</answer></answers>
<correctAnswer>A</correctAnswer><source>(Winograd 1972)</source>
</schema>
<schema>
<text><txt1>Joan made sure to thank Susan for all the help</txt1><pron>she</pron><txt2>had given.</txt2></text>
<answers><answer>Joan</answer><answer>Susan</answer></answers>
<correctAnswer>B</correctAnswer><source>x</source>
</schema>
<schema>
<text><txt1>The dog chased the cat, which ran up a tree. It waited at the top. Then</txt1><pron>its</pron>
<txt2>owner came.</txt2></text>
<answers><answer>The dog</answer><answer>The cat</answer></answers>
<correctAnswer>B</correctAnswer><source>x</source>
</schema>
</collection>
"""


def test_wsc_partial_scoring(tok, tmp_path):
    path = tmp_path / "WSCollection.xml"
    path.write_bytes(WSC_XML.encode("latin-1"))
    bench = load_wsc(path, subset="all")
    first, _, third = bench.examples
    assert wsc_option(first, "The city councilmen") == "the city councilmen"
    assert wsc_option(third, "The cat") == "the cat's"
    assert wsc_prompts(first) == [
        ("The city councilmen refused the demonstrators a permit because the city councilmen", " feared violence."),
        ("The city councilmen refused the demonstrators a permit because the demonstrators", " feared violence.")]
    model = tiny_gpt(tok, block_size=128)
    sm = ScoringModel(model, tok, batch_size=3)
    assert max(len(tok.encode(c + x)) for e in bench.examples for c, x in wsc_prompts(e)) <= 128  # all in context
    result = evaluate_benchmark(sm, bench, progress=False)
    assert result.metrics == ["acc:partial"] and len(result.examples) == 3
    for example, score in zip(bench.examples, result.examples, strict=True):
        direct = []
        for context, continuation in wsc_prompts(example):  # no end-of-text before a non-empty context
            ctx, cont = tok.encode(context), tok.encode(continuation)
            with torch.no_grad():  # one plain forward pass over the whole pair
                logits, _ = model(torch.tensor([ctx + cont[:-1]]))
            logp = torch.log_softmax(logits[0, len(ctx) - 1:].double(), dim=-1)
            direct.append(-float(logp.gather(1, torch.tensor(cont).unsqueeze(1)).sum()))
        np.testing.assert_allclose(score.extra["option_nll"], direct, atol=1e-3)
        best = int(np.argmin(direct))
        assert score.correct == {"partial": best == example.meta["label"]}
        assert score.nll == pytest.approx(direct[example.meta["label"]], abs=1e-5)


def test_table3_columns_name_metrics_we_report():
    assert set(TABLE3) == {"117M", "345M", "762M", "1542M"}
    assert all(set(row) == set(TABLE3_COLUMNS) for row in TABLE3.values())
    assert TABLE3["1542M"]["lambada_acc"] == 63.24 and TABLE3["117M"]["wikitext2"] == 29.41


# ----------------------------------------------------------------------------- real data

def test_real_wikitext2_and_lambada(tok, real_data):
    wiki = load_benchmark(f"wikitext2:{real_data / 'lm_benchmarks/wikitext2_raw/wiki.test.raw'}")
    sm = ScoringModel(tiny_gpt(tok, block_size=64), tok, batch_size=8)
    result = evaluate_benchmark(sm, wiki, limit=2, stride=48, progress=False)
    assert [s.id for s in result.examples] == ["wikitext2-0", "wikitext2-1"]
    assert all(s.tokens > 100 and s.words > 100 for s in result.examples)
    assert math.fsum(s.nll for s in result.examples) == pytest.approx(result.meta["total_nll"], rel=1e-9)
    assert 1 < result.metric("token_ppl") <= tok.vocab_size * 10
    lambada = load_benchmark(f"lambada:{real_data / 'lm_benchmarks/lambada/lambada_test.jsonl'}")
    result = evaluate_benchmark(sm, lambada, limit=10, progress=False)
    assert len(result.examples) == 10 and all(set(s.correct) == {"last_token", "whole_word", "stopword"}
                                              for s in result.examples)
    assert [s.extra["target"] for s in result.examples] == [e.meta["target"] for e in lambada.examples[:10]]
