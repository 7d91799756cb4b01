"""GPT-2's zero-shot generative tasks (Radford et al. 2019, sections 3.5-3.8), scored in the
eval harness one ``ExampleScore`` per example, so every metric has its all / clean / dirty
numbers and bootstrap intervals like the language-modelling benchmarks.

    coqa    the document, the conversation's earlier turns and a final ``A:``; greedy; the
            answer is the generation's first line. Official CoQA F1 and EM: its answer
            normalisation (lower case, no punctuation, no a/an/the, single spaces), every
            reference answer (with several references, each is left out in turn and the
            best F1 against the others averaged), averaged per domain and over the in-domain
            and out-of-domain sources as its dev-set report does.
    cnn_dm  the article followed by ``TL;DR:``; 100 tokens by top-k sampling with k = 2; the
            first 3 generated sentences are the summary. ROUGE-1/2/L F1 (rouge-score, Porter
            stemmer) against the highlights; also the paper's "no hint" ablation (the article
            alone), the lead-3 baseline (the article's first 3 sentences) and random-3 (3 of
            its sentences drawn at random, seeded, in article order).
    wmt14   example pairs ``english sentence = french sentence`` (``fr-en``: ``french = english``),
            one a line, then ``source sentence =``; greedy; the first generated sentence of the
            first line. BLEU with sacrebleu (13a tokenisation, exponential smoothing) from
            summed sentence statistics, so clean and dirty subsets get corpus BLEU too.
    nq      example ``Q: question`` / ``A: answer`` pairs, then ``Q: question`` / ``A:``; greedy;
            the first line. Exact match after SQuAD's normalisation against every reference;
            the answer's probability ranks the examples for the paper's calibration view
            (accuracy on the most confident 1% and 10%; the 30 most confident listed).

Example pairs (wmt14, nq) come from ``pairs`` (a user's file of ``left<TAB>right`` lines,
english/french or question/answer) or, without one, are drawn for each example (seeded by
the example's id) from OTHER documents of the same test set (WMT: another ``docid``; NQ:
another question). Contexts longer than the window are cut from the left; the task's own
prompt (the question, the source sentence, ``TL;DR:``) is always kept (``model.eval.decoding``).
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter
from collections.abc import Sequence

from sacrebleu.metrics import BLEU

from common.errors import InputError
from corpus.sentences import import_with_nltk
from dedup.benchmark_sets import COQA_IN_DOMAIN, BenchmarkSet, Example
from model.eval.decoding import Decoding, StopRule, answer_logprob, generate_texts, word_sentences
from model.eval.metrics import BLEU_ORDER, ExampleScore

rouge_scorer = import_with_nltk("rouge_score.rouge_scorer")  # Google's rouge-score (its stemmer is NLTK's Porter)

# GPT-2 section 3.6: "generate 100 tokens with Top-k random sampling (Fan et al., 2018) with k = 2
# ... use the first 3 generated sentences in these 100 tokens as the summary"
CNN_DM_NEW_TOKENS = 100
CNN_DM_TOP_K = 2
CNN_DM_SENTENCES = 3
TLDR_HINT = "\nTL;DR:"  # GPT-2 section 3.6: "we add the text TL;DR: after the article"
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
CNN_DM_VARIANTS = ("tldr", "no_hint", "lead3", "random3")
ANSWER_NEW_TOKENS = 32  # CoQA / NQ: an answer is the first line of at most this many tokens (our choice)
TRANSLATION_NEW_TOKENS = 96  # WMT: a translation is the first sentence within this many tokens (our choice)
# New tokens per task as the protocol sets them; ``--max_new_tokens TASK=N`` changes one (and
# the report says so): a model with a short context cannot fit CNN/DM's 100 after an article.
TASK_NEW_TOKENS = {"coqa": ANSWER_NEW_TOKENS, "cnn_dm": CNN_DM_NEW_TOKENS, "wmt14": TRANSLATION_NEW_TOKENS, "nq": ANSWER_NEW_TOKENS}
PAPER_NEW_TOKENS = {"cnn_dm"}  # the tasks whose count is the paper's (GPT-2 section 3.6); the others are ours
EXAMPLE_PAIRS = 5  # example pairs drawn per WMT / NQ prompt when no file is given (our choice)
NQ_CONFIDENT_PERCENTS = (1, 10)  # GPT-2 section 3.8: accuracy on the 1% (and 10%) most confident answers
NQ_LISTED = 30  # GPT-2 Table 5: the 30 most confident answers
BLEU_SETTINGS = {"tokenize": "13a"}  # sacrebleu's standard (WMT) tokenisation

# GPT-2 (1542M) as published, in our metrics' units (accuracies as fractions): CoQA 55 F1 (abstract,
# section 3.5); CNN/DM Table 4 (GPT-2 TL;DR:, no hint, Lede-3, Random-3); WMT-14 section 3.7;
# NQ section 3.8 (4.1% exact match, 63.1% on the 1% most confident answers)
PAPER = {
    "coqa": {"mean:f1": 55.0},
    "cnn_dm": {"mean:tldr:rouge1": 29.34, "mean:tldr:rouge2": 8.27, "mean:tldr:rougeL": 26.58,
               "mean:no_hint:rouge1": 21.58, "mean:no_hint:rouge2": 4.03, "mean:no_hint:rougeL": 19.47,
               "mean:lead3:rouge1": 40.38, "mean:lead3:rouge2": 17.66, "mean:lead3:rougeL": 36.62,
               "mean:random3:rouge1": 28.78, "mean:random3:rouge2": 8.63, "mean:random3:rougeL": 25.52},
    "wmt14-en-fr": {"bleu": 5.0},
    "wmt14-fr-en": {"bleu": 11.5},
    "nq": {"acc:em": 0.041, "conf_acc:1:em": 0.631},
}
PAPER_LABEL = "GPT-2 1542M (paper)"

TASK_METRICS = {
    "coqa": ["mean:f1", "mean:em", "mean:f1:in_domain", "mean:f1:out_domain"],
    "cnn_dm": [f"mean:{variant}:{rouge}" for variant in CNN_DM_VARIANTS for rouge in ROUGE_TYPES],
    "wmt14": ["bleu"],
    "nq": ["acc:em", *[f"conf_acc:{p}:em" for p in NQ_CONFIDENT_PERCENTS]],
}


def paper_reference(bench: BenchmarkSet) -> dict | None:
    """The paper's numbers for a generative benchmark (the 1.5B model's), for the report."""
    task = bench.meta.get("task")
    key = f"wmt14-{bench.meta.get('direction')}" if task == "wmt14" else task
    values = PAPER.get(key)
    return {"label": PAPER_LABEL, "values": dict(values)} if values else None


class PairsError(InputError):
    """An example-pairs file that cannot be read."""


# ----------------------------------------------------------------------------- answer scoring

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's (and CoQA's) answer normalisation: lower case, punctuation removed, the
    articles a / an / the removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(reference)


def token_f1(prediction: str, reference: str) -> float:
    """Word-overlap F1 of the normalised answers (1 when both are empty, 0 when one is)."""
    pred, gold = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def coqa_turn_scores(prediction: str, references: Sequence[str]) -> tuple[float, float]:
    """``(em, f1)`` of one turn as CoQA's official script scores it: with several references,
    each is left out in turn, the best score against the rest taken, and the results averaged."""
    if len(references) == 1:
        return float(exact_match(prediction, references[0])), token_f1(prediction, references[0])
    em = f1 = 0.0
    for i in range(len(references)):
        others = [*references[:i], *references[i + 1:]]
        em += max(float(exact_match(prediction, r)) for r in others)
        f1 += max(token_f1(prediction, r) for r in others)
    return em / len(references), f1 / len(references)


# ----------------------------------------------------------------------------- example pairs

def read_pairs(path: str) -> list[tuple[str, str]]:
    """A user's example pairs: ``left<TAB>right`` lines (english/french, or question/answer)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as exc:
        raise PairsError(f"--example_pairs {path}: {exc.strerror or exc}") from None
    pairs = []
    for number, line in enumerate(lines, start=1):
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise PairsError(f"--example_pairs {path}:{number}: expected 'left<TAB>right', got {line[:60]!r}")
        pairs.append((parts[0].strip(), parts[1].strip()))
    if not pairs:
        raise PairsError(f"--example_pairs {path}: no pairs in it")
    return pairs


def draw_others(bench: BenchmarkSet, example: Example, k: int, seed: int) -> list[Example]:
    """``k`` examples of ``bench`` drawn for ``example`` (seeded by its id), none from its own
    document (``meta["doc"]``; an example without one is its own document)."""
    own = example.meta.get("doc", example.id)
    pool = bench.examples
    eligible = sum(1 for e in pool if e.meta.get("doc", e.id) != own) if len(pool) <= 4 * k else None
    if eligible is not None and eligible < k:
        raise ValueError(f"{bench.name}: fewer than {k} examples outside {own!r} to draw example pairs from")
    rng = random.Random(f"{seed}:{example.id}")
    chosen: list[int] = []
    while len(chosen) < k:
        i = rng.randrange(len(pool))
        if i not in chosen and pool[i].meta.get("doc", pool[i].id) != own:
            chosen.append(i)
    return [pool[i] for i in chosen]


# ----------------------------------------------------------------------------- prompts

def coqa_prompt(example: Example) -> tuple[str, str]:
    meta = example.meta
    turns = "".join(f"Q: {q}\nA: {a}\n\n" for q, a in meta["history"])
    return f"{meta['story']}\n\n{turns}", f"Q: {meta['question']}\nA:"


def translation_pair(example: Example, direction: str) -> tuple[str, str]:
    """``(source, target)`` of a WMT example in the prompt's order for ``direction``."""
    return (example.meta["english"], example.meta["french"]) if direction == "en-fr" else \
        (example.meta["french"], example.meta["english"])


def wmt_prompt(example: Example, direction: str, pairs: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """``pairs`` are (english, french); the prompt puts the source language on the left."""
    ordered = pairs if direction == "en-fr" else [(fr, en) for en, fr in pairs]
    body = "".join(f"{left} = {right}\n" for left, right in ordered)
    return body, f"{example.meta['source']} ="


def nq_prompt(example: Example, pairs: Sequence[tuple[str, str]]) -> tuple[str, str]:
    body = "".join(f"Q: {q}\nA: {a}\n\n" for q, a in pairs)
    return body, f"Q: {example.meta['question']}\nA:"


# ----------------------------------------------------------------------------- scoring

def _article_sentences(article: str) -> list[str]:
    """The article's sentences for lead-3 and random-3 (whitespace normalised; none that is
    punctuation only: ``decoding.word_sentences``)."""
    return word_sentences(" ".join(article.split()))


def rouge_values(scorer, prefix: str, summary: str, reference: str) -> dict[str, float]:
    scores = scorer.score(reference, summary)
    return {f"{prefix}:{rouge}": 100.0 * scores[rouge].fmeasure for rouge in ROUGE_TYPES}


def bleu_values(bleu: BLEU, hypothesis: str, reference: str) -> dict[str, float]:
    stats = bleu.sentence_score(hypothesis, [reference])
    values = {"bleu_sys_len": float(stats.sys_len), "bleu_ref_len": float(stats.ref_len)}
    for n in range(BLEU_ORDER):
        values[f"bleu_correct_{n + 1}"] = float(stats.counts[n])
        values[f"bleu_total_{n + 1}"] = float(stats.totals[n])
    return values


def new_tokens_for(task: str, overrides: dict | None = None) -> int:
    """The number of tokens ``task`` generates: ``overrides[task]`` (``--max_new_tokens``) or the protocol's."""
    return (overrides or {}).get(task, TASK_NEW_TOKENS[task])


def check_generative(model, bench: BenchmarkSet, overrides: dict | None = None) -> None:
    """Refuse (``ValueError``) a generative benchmark this model cannot run, before anything
    is scored: no corpusforge GPT, or no room for a prompt once the new tokens are set aside."""
    task = bench.meta["task"]
    block = getattr(getattr(model, "config", None), "block_size", None)
    if block is None:
        raise ValueError(f"{bench.name}: generation needs a corpusforge GPT (a run folder, checkpoint or Hugging Face "
                         f"GPT-2 folder loaded by corpusforge), not {type(model).__name__}")
    wanted = new_tokens_for(task, overrides)
    if block - wanted < 1:
        raise ValueError(f"{bench.name}: {wanted} new tokens leave no room for a prompt in the model's context of {block} "
                         f"tokens; pass --max_new_tokens {task}=N with N < {block}")


def score_generative(model, tokenizer, bench: BenchmarkSet, examples: list[Example], *, batch_size: int = 8,
                     seed: int = 0, pairs: Sequence[tuple[str, str]] | None = None, progress=None,
                     new_tokens: dict | None = None) -> tuple[list[ExampleScore], list[str], dict]:
    """Generate for each example as its task says and score it: ``(scores, metrics, meta)``;
    ``new_tokens``: per-task overrides of the tokens generated (``TASK_NEW_TOKENS``)."""
    task = bench.meta["task"]
    meta: dict = {"task": task, "seed": seed, "max_new_tokens": new_tokens_for(task, new_tokens)}
    if task in (new_tokens or {}) and new_tokens[task] != TASK_NEW_TOKENS[task]:
        source = "the paper's" if task in PAPER_NEW_TOKENS else "the protocol's"
        meta["protocol_changed"] = f"{new_tokens[task]} new tokens instead of {source} {TASK_NEW_TOKENS[task]} (--max_new_tokens)"
    run = lambda prompts, decoding: generate_texts(model, tokenizer, prompts, decoding, batch_size=batch_size,  # noqa: E731
                                                   progress=progress)
    scores = []
    if task == "coqa":
        generations, cut = run([coqa_prompt(e) for e in examples], Decoding(meta["max_new_tokens"], StopRule("newline")))
        for example, g in zip(examples, generations, strict=True):
            em, f1 = coqa_turn_scores(g.answer, example.meta["answers"])
            domain = example.meta["domain"]
            side = "in_domain" if domain in COQA_IN_DOMAIN else "out_domain"
            scores.append(_score(example, g, {"f1": 100 * f1, "em": 100 * em, f"f1:{domain}": 100 * f1,
                                              f"f1:{side}": 100 * f1}, references=example.meta["answers"]))
        domains = sorted({e.meta["domain"] for e in examples})
        metrics = TASK_METRICS["coqa"] + [f"mean:f1:{d}" for d in domains]
    elif task == "cnn_dm":
        scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
        summary_rule = StopRule("sentences", CNN_DM_SENTENCES)
        decoding = Decoding(meta["max_new_tokens"], summary_rule, top_k=CNN_DM_TOP_K, seed=seed)
        with_hint, cut = run([(e.meta["article"], TLDR_HINT) for e in examples], decoding)
        no_hint, _ = run([(e.meta["article"], "") for e in examples], decoding)
        for example, hinted, plain in zip(examples, with_hint, no_hint, strict=True):
            reference = example.meta["reference"]
            sentences = _article_sentences(example.meta["article"])
            rng = random.Random(f"{seed}:{example.id}")
            picked = sorted(rng.sample(range(len(sentences)), min(CNN_DM_SENTENCES, len(sentences))))
            values = {**rouge_values(scorer, "tldr", hinted.answer, reference),
                      **rouge_values(scorer, "no_hint", plain.answer, reference),
                      **rouge_values(scorer, "lead3", " ".join(sentences[:CNN_DM_SENTENCES]), reference),
                      **rouge_values(scorer, "random3", " ".join(sentences[i] for i in picked), reference)}
            scores.append(_score(example, hinted, values, references=[reference], no_hint=plain.answer))
        metrics = list(TASK_METRICS["cnn_dm"])
        meta["rouge"] = "rouge-score, F1, Porter stemmer"
    elif task == "wmt14":
        direction = bench.meta["direction"]
        # sentence statistics (effective order changes only a sentence's own score, not its counts)
        sentence_bleu = BLEU(**BLEU_SETTINGS, effective_order=True)
        prompts = []
        for example in examples:
            shots = pairs if pairs else [(e.meta["english"], e.meta["french"])
                                         for e in draw_others(bench, example, EXAMPLE_PAIRS, seed)]
            prompts.append(wmt_prompt(example, direction, shots))
        generations, cut = run(prompts, Decoding(meta["max_new_tokens"], StopRule("sentences", 1, first_line=True)))
        for example, g in zip(examples, generations, strict=True):
            scores.append(_score(example, g, bleu_values(sentence_bleu, g.answer, example.meta["reference"]),
                                 references=[example.meta["reference"]]))
        metrics = list(TASK_METRICS["wmt14"])
        corpus_bleu = BLEU(**BLEU_SETTINGS)  # sacrebleu's own corpus score of all examples, and its signature
        whole = corpus_bleu.corpus_score([g.answer for g in generations], [[e.meta["reference"] for e in examples]])
        meta.update(direction=direction, bleu_signature=str(corpus_bleu.get_signature()), sacrebleu_all=whole.score)
    elif task == "nq":
        prompts = []
        for example in examples:
            shots = pairs if pairs else [(e.meta["question"], e.meta["answers"][0])
                                         for e in draw_others(bench, example, EXAMPLE_PAIRS, seed)]
            prompts.append(nq_prompt(example, shots))
        generations, cut = run(prompts, Decoding(meta["max_new_tokens"], StopRule("newline")))
        for example, g in zip(examples, generations, strict=True):
            logprob = answer_logprob(tokenizer, g)
            correct = any(exact_match(g.answer, a) for a in example.meta["answers"])
            scores.append(_score(example, g, {"confidence": logprob if math.isfinite(logprob) else -1e30},
                                 correct={"em": correct}, references=example.meta["answers"],
                                 probability=math.exp(logprob) if math.isfinite(logprob) else 0.0))
        metrics = list(TASK_METRICS["nq"])
    else:
        raise ValueError(f"{bench.name}: no generative task {task!r}")
    if task in ("wmt14", "nq"):
        meta["example_pairs"] = (f"{len(pairs)} pairs from the user's file" if pairs else
                                 f"{EXAMPLE_PAIRS} pairs per example drawn (seed {seed}) from other documents of "
                                 f"the same test set")
    meta["contexts_cut"] = cut
    return scores, metrics, meta


def _score(example: Example, generation, values: dict, *, correct: dict | None = None, references=(), **extra
           ) -> ExampleScore:
    return ExampleScore(example.id, tokens=len(generation.tokens), correct=dict(correct or {}),
                        extra={"prediction": generation.answer, "references": list(references), **extra},
                        values=values)


def most_confident(scores: Sequence[ExampleScore], examples: Sequence[Example], top: int = NQ_LISTED) -> list[dict]:
    """NQ: the ``top`` answers with the highest probability (GPT-2 Table 5's listing)."""
    questions = {e.id: e.meta["question"] for e in examples}
    ranked = sorted(scores, key=lambda s: -s.values["confidence"])[:top]
    return [{"id": s.id, "question": questions[s.id], "answer": s.extra["prediction"],
             "probability": s.extra["probability"], "correct": s.correct["em"]} for s in ranked]
