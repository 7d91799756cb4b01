"""Parity of model.eval.scoring with lm-evaluation-harness 0.4.13, using its own code on the same model.

The model is a tiny random GPT-2 saved as a local Hugging Face folder (model.hf.save_hf_dir,
with its tokenizer files); we score it as our GPT (model.hf.load_hf_dir), lm-evaluation-
harness scores it through its ``HFLM`` class (a ``transformers.GPT2LMHeadModel`` loaded from
the folder, its ``AutoTokenizer``). No network.

What is the same, and what is not (see docs/evaluation-scoring.md):
- windows: our ``stride == context`` windows are lm_eval's ``get_rolling_token_windows``
  (``context_len=1``, what ``loglikelihood_rolling`` uses) + ``make_disjoint_window``; any
  stride S is lm_eval's windows with ``context_len = context - S + 1``;
- per-document log-likelihoods, bytes and bits per byte: equal;
- word perplexity: the same sum over the same documents, but lm_eval divides by
  ``len(re.split(r"\\s+", page))`` while WikiText word counts here add one end-of-line word
  per line (the count of Merity et al.); with lm_eval's count both numbers are equal;
- LAMBADA: the last-word log-likelihood and lm_eval's ``is_greedy`` equal our NLL and
  ``acc:whole_word``.
"""

from __future__ import annotations

import math
import re
import types

import numpy as np
import pytest
import torch

pytest.importorskip("lm_eval")

from lm_eval.api.metrics import bits_per_byte, perplexity, weighted_perplexity  # noqa: E402
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: E402

from dedup.benchmark_sets import load_benchmark  # noqa: E402
from model.eval.metrics import ExampleScore, compute_metric  # noqa: E402
from model.eval.scoring import ScoringModel, evaluate_benchmark, split_last_word  # noqa: E402
from model.gpt import GPT, GPTConfig  # noqa: E402

torch.set_num_threads(1)
CONTEXT = 32


def _import_hflm():
    from lm_eval.models.huggingface import HFLM

    return HFLM


def _wikitext_task():
    from lm_eval.tasks.wikitext import preprocess_wikitext

    return preprocess_wikitext


@pytest.fixture(scope="module")
def wiki_path(real_data):
    return real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw"


@pytest.fixture(scope="module")
def hf_pair(wiki_path, tmp_path_factory):
    """(our ScoringModel, lm_eval HFLM) on the same tiny random GPT-2 folder."""
    from transformers import GPT2LMHeadModel

    from model.hf import save_hf_dir
    from model.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("parity")
    tok = train_tokenizer([wiki_path.read_text(encoding="utf-8")[:100_000]], vocab_size=1024, show_progress=False)
    tok.save(root / "tok")
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=CONTEXT, vocab_size=tok.vocab_size))
    with torch.no_grad():  # weights large enough that the context changes the predictions
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.2)
    folder = save_hf_dir(model, root / "hf", tokenizer_files=[root / "tok/vocab.json", root / "tok/merges.txt"],
                         eot_token_id=tok.eot_id)
    ours = ScoringModel.load(folder, batch_size=16)  # model.checkpoint.load_model: HF folder -> our GPT
    assert isinstance(ours.model, GPT) and ours.tokenizer.vocab_size == tok.vocab_size
    HFLM = _import_hflm()
    theirs = HFLM(pretrained=GPT2LMHeadModel.from_pretrained(folder).eval(), tokenizer=str(folder), batch_size=16)
    assert theirs.max_length == CONTEXT and theirs.prefix_token_id == tok.eot_id
    return ours, theirs


def _instances(kind: str, arguments: list[tuple]):
    from lm_eval.api.instance import Instance

    return [Instance(request_type=kind, doc={}, arguments=args, idx=i) for i, args in enumerate(arguments)]


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 64, 100, 257])
@pytest.mark.parametrize("stride", [32, 16, 7, 1])
def test_windows_are_lm_evals_rolling_windows(n, stride):
    sm = ScoringModel(GPT(GPTConfig(n_layer=1, n_head=1, n_embd=8, block_size=CONTEXT, vocab_size=300)),
                      types.SimpleNamespace(eot_id=299), batch_size=1)
    ids = list(range(n))
    seq = [299, *ids]
    ours = [(seq[start:end], ids[first:end]) for start, end, first in sm.windows(n, stride)]
    theirs = list(get_rolling_token_windows(ids, prefix_token=299, max_seq_len=CONTEXT,
                                            context_len=CONTEXT - stride + 1))
    assert ours == [(list(a), list(b)) for a, b in theirs]
    if stride == CONTEXT:  # what loglikelihood_rolling feeds the model: (context + continuation)[-(L + 1):][:-1]
        fed = [((a + b)[-(CONTEXT + 1):][:-1], b) for a, b in map(make_disjoint_window, theirs)]
        assert ours == fed


def test_wikitext_word_perplexity_and_bits_per_byte(hf_pair, wiki_path):
    ours_sm, theirs = hf_pair
    task = _wikitext_task()
    bench = load_benchmark(f"wikitext2:{wiki_path}")
    limit = 2

    def lm_eval_detokenizer(text: str) -> str:
        return task.wikitext_detokenizer({"page": text})

    # ours: each article's slice of the file scored on its own, disjoint windows, lm_eval's detokenizer
    result = evaluate_benchmark(ours_sm, bench, stride=CONTEXT, limit=limit, documents=True,
                                detokenize=lm_eval_detokenizer, progress=False)
    from model.eval.scoring import example_slices

    text, starts, _, _ = example_slices(bench, bench.examples[:limit])
    pages = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    # theirs: the same pages through the wikitext task's own pieces
    loglik = theirs.loglikelihood_rolling(_instances("loglikelihood_rolling",
                                                     [(lm_eval_detokenizer(p),) for p in pages]), disable_tqdm=True)
    processed = [task.process_results({"page": p}, [ll]) for p, ll in zip(pages, loglik, strict=True)]
    for score, ll, page in zip(result.examples, loglik, pages, strict=True):
        assert score.nll == pytest.approx(-ll, rel=2e-6)
        assert score.bytes == len(page.encode("utf-8"))
        # the documented difference: one end-of-line word per line here, whitespace pieces there
        assert score.words == len(page.split()) + page.count("\n")
        assert len(re.split(r"\s+", page)) == len(page.split()) + 2  # the page opens with " " and ends with "\n"
    assert result.metric("bpb") == pytest.approx(bits_per_byte([r["bits_per_byte"] for r in processed]), rel=2e-6)
    with_their_words = [ExampleScore(s.id, s.nll, s.tokens, r["word_perplexity"][1], s.bytes, s.chars)
                        for s, r in zip(result.examples, processed, strict=True)]
    assert compute_metric(with_their_words, "word_ppl") == pytest.approx(
        weighted_perplexity([r["word_perplexity"] for r in processed]), rel=2e-6)
    # and the two word perplexities differ only by the denominator
    ours_ppl, their_ppl = result.metric("word_ppl"), weighted_perplexity([r["word_perplexity"] for r in processed])
    their_words = sum(r["word_perplexity"][1] for r in processed)
    assert math.log(ours_ppl) * sum(s.words for s in result.examples) == pytest.approx(
        math.log(their_ppl) * their_words, rel=2e-6)


def test_lambada_last_word_loglikelihood_and_greedy(hf_pair, real_data):
    sm, theirs = hf_pair
    bench = load_benchmark(f"lambada:{real_data / 'lm_benchmarks/lambada/lambada_test.jsonl'}")
    limit = 24
    result = evaluate_benchmark(sm, bench, limit=limit, progress=False)
    # lambada_openai: doc_to_text = all but the last space-separated word, doc_to_target = " " + last word
    pairs = [(" ".join(e.text.split(" ")[:-1]), " " + e.text.split(" ")[-1]) for e in bench.examples[:limit]]
    for e, (ctx, target) in zip(bench.examples, pairs, strict=False):
        assert split_last_word(e.text) == (ctx, target)
    outputs = theirs.loglikelihood(_instances("loglikelihood", pairs), disable_tqdm=True)
    for score, (ll, greedy) in zip(result.examples, outputs, strict=True):
        assert score.nll == pytest.approx(-ll, rel=2e-6)
        assert score.correct["whole_word"] == bool(greedy)
    assert result.metric("lastword_ppl") == pytest.approx(perplexity([ll for ll, _ in outputs]), rel=2e-6)
    assert result.metric("acc:whole_word") == pytest.approx(np.mean([g for _, g in outputs]))
