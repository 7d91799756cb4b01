"""The demo (``corpusforge demo``): every job on the bundled sample crawl, offline. Its steps, its options
and its ``--help``: ``pipelines.demo.options``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
from dataclasses import dataclass

import torch
from tqdm import tqdm

from common import memfs, storage
from corpus.sentences import (
    PUNKT_INSTALL_COMMAND,
    PunktMissingError,
    punkt_data_environment,
    require_punkt,
    use_trained_punkt,
)
from corpus.shards import FORMATS, find_shards, read_documents
from corpus.stats import compute_stats, format_stats, plot_length_histogram
from corpus.warc import inspect_archive
from model.checkpoint import load_model, tokenizer_folder
from model.eval.harness import run_eval
from model.eval.report import format_summary as format_eval
from model.finetune.train import demo_finetune
from model.finetune.train import format_summary as format_finetune
from model.sample import generate
from model.tokenizer import BPETokenizer
from model.train import config_from_args, train
from model.train import format_summary as format_training
from pipelines.audit.job import REMOVED_FILE, format_audit, format_decontaminate, run_audit, run_decontaminate
from pipelines.c4.job import format_summary as format_c4_summary
from pipelines.c4.job import run as run_c4
from pipelines.demo.options import add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.jobs import STATS_FILE, write_json
from pipelines.read.job import run as run_read
from pipelines.spark_launch import SparkStartError, missing_java, short_run_jvm
from pipelines.tokenize.job import format_summary as format_tokenize
from pipelines.tokenize.job import run as run_tokenize
from pipelines.webtext.job import format_summary as format_webtext_summary
from pipelines.webtext.job import run as run_webtext
from samplecrawl.crawl import SampleCrawl, write_sample_crawl

log = logging.getLogger(__name__)

DEMO_VOCAB = 1024  # a vocabulary the sample corpus can fill (GPT-2's is 50,257)
DEMO_MODEL = ["--model", "gpt2", "--n_layer", "2", "--n_head", "2", "--n_embd", "64", "--block_size", "64",
              "--batch_tokens", "2048", "--micro_batch", "16"]
DEMO_MODEL_DESC = "2 layers, 64 wide, context 64"
DEMO_STEPS = 40
C4_MEMORY = "memory://demo/c4"  # the C4 job's second output: an in-process object store


@dataclass(frozen=True)
class DemoFolders:
    """Where each stage of the demo writes, all under ``out``."""

    out: str
    crawl: str
    inspection: str
    documents: str
    c4: str
    c4_spark: str
    webtext: str
    audit: str
    decontaminated: str
    tokens: str
    model: str
    finetune: str
    eval: str
    corpus_stats: str
    png: str
    punkt: str

    @classmethod
    def under(cls, out: str) -> DemoFolders:
        def path(name: str) -> str:
            return os.path.join(out, name)

        return cls(out, crawl=path("sample-crawl"), inspection=path("inspect.json"), documents=path("documents"), c4=path("c4"),
                   c4_spark=path("c4-spark"), webtext=path("webtext"), audit=path("audit"), decontaminated=path("c4-decontaminated"), tokens=path("tokens"),
                   model=path("model"), finetune=path("finetune"), eval=path("eval"), corpus_stats=path("corpus-stats.json"), png=path("document-lengths.png"),
                   punkt=path("punkt-stand-in"))


def _compare_manifests(local: str, remote: str, skip: tuple[str, ...] = ()) -> dict:
    """The two runs' ``_SUCCESS`` manifests, file by file (names, sizes, sha256), ``skip`` aside."""
    ours, theirs = storage.read_success(local)["files"], storage.read_success(remote)["files"]
    shards = [f for f in ours if f["name"] not in skip]
    same = [f for f in shards if f in theirs]
    summary = (f"{len(same)} of {len(shards)} files byte-identical to the local run" if len(same) == len(shards)
               else f"DIFFERENT from the local run: {sorted(f['name'] for f in shards if f not in same)}")
    return {"files": len(ours), "identical": len(same) == len(shards), "summary": summary}


def _ensure_sentence_model(docs_dir: str, data_dir: str) -> str | None:
    """C4 counts punkt sentences. Without NLTK's English model installed, the demo trains a
    punkt model on its own sample pages (unsupervised, as punkt is), saves it as NLTK data in
    ``data_dir`` and says so; returns that folder (``None`` when the real model is there). The
    demo's later steps run with ``NLTK_DATA`` pointing there too (``punkt_data_environment``),
    so the Python workers of its Spark run load the same stand-in."""
    try:
        require_punkt()
        return None
    except PunktMissingError:
        log.warning("NLTK's English punkt model is not installed: the demo trains a punkt model on its sample pages "
                    "instead (saved in %s). Sentence counts of a real corpus need the real model: %s", data_dir, PUNKT_INSTALL_COMMAND)
        return use_trained_punkt((doc.text for doc in read_documents(find_shards(docs_dir))), data_dir)


# -- the stages, in the order the demo runs them -------------------------------------------------


def build_sample(folders: DemoFolders, seed: int, pages: int) -> SampleCrawl:
    """1. The sample crawl: WET, WARC, manifests, a Pushshift-style dump, a benchmark."""
    os.makedirs(folders.out, exist_ok=True)
    log.info("1/11 generating the sample crawl (seed %d, %d pages) in %s", seed, pages, folders.crawl)
    return write_sample_crawl(folders.crawl, seed=seed, pages=pages)


def inspect_crawl(folders: DemoFolders, crawl: SampleCrawl) -> None:
    """2. Records by type, MIME type, language header and error, per crawl file."""
    log.info("2/11 inspecting %d crawl files", len(crawl.wet_paths) + len(crawl.warc_paths))
    inspection = {}
    for path in tqdm(crawl.wet_paths + crawl.warc_paths, desc="inspect", unit="file"):
        summary = inspect_archive(path).to_dict()
        inspection[os.path.basename(path)] = {k: summary[k] for k in ("records", "mime_types", "languages", "errors")}
    write_json(folders.inspection, inspection)


def read_crawl(folders: DemoFolders, crawl: SampleCrawl) -> dict:
    """3. The WET files of the manifest read into JSON and Parquet document shards (Beam)."""
    log.info("3/11 reading the WET manifest into shards with Beam (DirectRunner) in %s", folders.documents)
    return run_read(
        ["--input", crawl.manifest_path, "--base_url", folders.crawl, "--output", folders.documents, "--overwrite",
         "--format", "c4json", "parquet", "--num_shards", "2", "--name", "sample"]
    )


def build_c4(folders: DemoFolders, crawl: SampleCrawl) -> tuple[dict, dict]:
    """4. C4 ``en`` from the WET manifest (Beam), then the same job into ``memory://``; its stats and
    how the two outputs compare."""
    log.info("4/11 building C4 en from the WET manifest with Beam (DirectRunner) in %s", folders.c4)
    c4_stats = run_c4(
        ["--input", crawl.manifest_path, "--base_url", folders.crawl, "--output", folders.c4, "--overwrite", "--badwords", crawl.badwords_path,
         "--format", "c4json", "parquet", "--num_shards", "2"]
    )
    log.info("4/11 the same C4 job once more into memory://, an in-process object store (S3 and GCS work the same way)")
    run_c4(["--input", crawl.manifest_path, "--base_url", folders.crawl, "--output", C4_MEMORY, "--badwords", crawl.badwords_path,
            "--format", "c4json", "parquet", "--num_shards", "2"])
    in_memory = _compare_manifests(folders.c4, C4_MEMORY)
    memfs.clear()
    return c4_stats, in_memory


def build_c4_on_spark(folders: DemoFolders, crawl: SampleCrawl) -> dict:
    """4. The same C4 job on the native Spark engine (``local[2]``), compared file by file with
    Beam's; _stats.json aside (its ``write-shards`` tallies count each engine's own work)."""
    if importlib.util.find_spec("pyspark") is None:
        log.warning("4/11 pyspark is not installed: no Spark run (pip install 'corpusforge[spark]')")
        return {"identical": None, "summary": "not run: pip install 'corpusforge[spark]'"}
    why = missing_java()
    if why:
        log.warning("4/11 no Java for Spark's JVM, no Spark run: %s", why)
        return {"identical": None, "summary": f"not run: {why}"}
    log.info("4/11 the same C4 job on Spark (local[2], the native engine) in %s", folders.c4_spark)
    try:
        with short_run_jvm():  # a small job: the JVM's start is most of its cost
            run_c4(["--input", crawl.manifest_path, "--base_url", folders.crawl, "--output", folders.c4_spark, "--overwrite",
                    "--badwords", crawl.badwords_path, "--format", "c4json", "parquet", "--num_shards", "2", "--engine", "spark",
                    "--spark_master", "local[2]"])
    except SparkStartError as exc:  # a java that is there but cannot run this Spark: the rest of the demo goes on
        log.warning("4/11 no Spark run: %s", exc)
        return {"identical": None, "summary": f"not run: {exc}"}
    return _compare_manifests(folders.c4, folders.c4_spark, skip=(STATS_FILE,))


def build_webtext(folders: DemoFolders, crawl: SampleCrawl) -> dict:
    """5. WebText from the sample's Pushshift dump joined against its WARC files (offline, reproducible)."""
    log.info("5/11 building WebText: Reddit links joined against the sample WARC files, in %s", folders.webtext)
    return run_webtext(
        ["--submissions", crawl.submissions_zst_path, "--pages", "crawl", "--warc", *crawl.warc_paths,
         "--output", folders.webtext, "--overwrite", "--format", "parquet", "jsonl"]
    )


def benchmark_spec(crawl: SampleCrawl) -> str:
    """The sample benchmark as ``--benchmark`` names it."""
    return f"jsonl:{crawl.benchmark_path}:text"


def audit_c4(folders: DemoFolders, crawl: SampleCrawl) -> tuple[dict, dict]:
    """6. The C4 corpus audited against the sample benchmark (Bloom filter and exact index), then decontaminated."""
    log.info("6/11 auditing the C4 corpus against the sample benchmark, in %s", folders.audit)
    benchmark = benchmark_spec(crawl)
    audit_result = run_audit(["--corpus", folders.c4, "--benchmark", benchmark, "--output", folders.audit, "--overwrite",
                              "--corpus_name", "C4 (sample crawl)", "--fp_queries", "1000000"])
    decontaminated = run_decontaminate(["--corpus", folders.c4, "--benchmark", benchmark, "--output", folders.decontaminated, "--overwrite",
                                        "--mode", "spans"])
    return audit_result, decontaminated


def tokenize_c4(folders: DemoFolders) -> dict:
    """7. A small byte-level BPE trained on the C4 corpus, and its llm.c token shards (Beam)."""
    log.info("7/11 tokenizing the C4 corpus (a %d-token byte-level BPE trained on it) into %s", DEMO_VOCAB, folders.tokens)
    return run_tokenize(["--input", folders.c4, "--output", folders.tokens, "--overwrite", "--vocab_size", str(DEMO_VOCAB),
                         "--val_docs", "4", "--prefix", "c4"])


def train_tiny_gpt2(folders: DemoFolders, seed: int) -> tuple[dict, str]:
    """8. A tiny GPT-2 trained on the token shards on the CPU, and a few tokens sampled from it."""
    run_dir = folders.model
    log.info("8/11 training a tiny GPT-2 (%s) for %d steps on the CPU in %s", DEMO_MODEL_DESC, DEMO_STEPS, run_dir)
    if os.path.exists(os.path.join(run_dir, "ckpt.pt")):
        shutil.rmtree(run_dir)  # a rerun of the demo trains afresh
    training = train(config_from_args(["--data", folders.tokens, "--out", run_dir, *DEMO_MODEL, "--max_steps", str(DEMO_STEPS),
                                       "--eval_interval", str(DEMO_STEPS // 2), "--ckpt_interval", str(DEMO_STEPS),
                                       "--log_interval", "10", "--device", "cpu", "--seed", str(seed)]))
    model = load_model(run_dir)
    tokenizer = BPETokenizer.load(tokenizer_folder(run_dir))
    prompt = tokenizer.encode("The ")
    generator = torch.Generator().manual_seed(seed)
    continuation = generate(model, torch.tensor([prompt]), 24, temperature=0.8, top_k=40, generator=generator)
    return training, tokenizer.decode(continuation[0].tolist())


DEMO_FINETUNE_STEPS = 40


def finetune_tiny_gpt2(folders: DemoFolders, seed: int) -> dict:
    """9. The tiny GPT-2 fine-tuned with GPT-1's input transformations on a two-topic sentence
    task; its evaluation sentences marked clean / dirty against the C4 corpus."""
    log.info("9/11 fine-tuning the tiny GPT-2 (GPT-1's input transformations) for %d steps on a two-topic sentence task, "
             "the evaluation marked clean/dirty against the C4 corpus, in %s", DEMO_FINETUNE_STEPS, folders.finetune)
    return demo_finetune(folders.model, folders.finetune, steps=DEMO_FINETUNE_STEPS, training=folders.c4, seed=seed)


DEMO_TASK_PASSAGES = 6  # passages of the sample benchmark turned into each generative task's sample


def write_task_samples(crawl: SampleCrawl, folder: str) -> list[str]:
    """Small samples of two of GPT-2's generative tasks built from the sample benchmark's first
    passages, in their real layouts: CoQA's official JSON schema (the passage as the story, two
    questions about its opening and its closing words) and NQ-open JSONL (the passage's opening
    words as the question, the next word as the answer). Returns their ``--benchmark`` specs."""
    with open(crawl.benchmark_path, encoding="utf-8") as f:
        passages = [json.loads(line) for line in f][:DEMO_TASK_PASSAGES]
    stories, questions = [], []
    for row in passages:
        words = row["text"].split()
        turns = [("What are the text's first words?", " ".join(words[:3])), ("How does it end?", " ".join(words[-3:]))]
        stories.append({"source": "cnn", "id": str(row["id"]), "filename": f"{row['id']}.story", "story": row["text"],
                        "questions": [{"input_text": q, "turn_id": t} for t, (q, _) in enumerate(turns, start=1)],
                        "answers": [{"input_text": a, "turn_id": t} for t, (_, a) in enumerate(turns, start=1)]})
        questions.append({"question": " ".join(words[:10]), "answer": [words[10] if len(words) > 10 else words[-1]]})
    os.makedirs(folder, exist_ok=True)
    coqa, nq = os.path.join(folder, "coqa-sample.json"), os.path.join(folder, "nq-sample.jsonl")
    storage.write_atomically(coqa, json.dumps({"version": "1.0", "data": stories}, indent=1) + "\n")
    storage.write_atomically(nq, "".join(json.dumps(q) + "\n" for q in questions))
    return [f"coqa:{coqa}", f"nq:{nq}"]


def evaluate_model(folders: DemoFolders, crawl: SampleCrawl, seed: int) -> dict:
    """10. The model on the sample benchmark and on small samples of two generative tasks (CoQA, NQ),
    every metric on all / clean / dirty examples (dirty: the audit's overlaps, its Bloom filter for the samples)."""
    log.info("10/11 evaluating the model on the sample benchmark and on CoQA / NQ samples (all / clean / dirty by the "
             "audit), in %s", folders.eval)
    tasks = write_task_samples(crawl, os.path.join(folders.out, "generative-tasks"))
    return run_eval(folders.model, [benchmark_spec(crawl), *tasks], training=folders.audit, bootstrap=200, seed=seed,
                    report=folders.eval, progress=False)


def corpus_statistics(folders: DemoFolders):
    """11. Statistics of the C4 shards and a document-length histogram."""
    log.info("11/11 corpus statistics of the C4 shards")
    shards = find_shards(folders.c4)  # each shard once (its Parquet file), c4-train and c4-validation
    stats = compute_stats(read_documents(shards))
    plot_length_histogram(stats, folders.png, title=f"C4 from the sample crawl: {stats.documents} documents")
    write_json(folders.corpus_stats, stats.to_dict())
    return stats


def print_report(folders: DemoFolders, result: dict, stats) -> None:
    """Every job's summary, then where each output is."""
    crawl, out = result["crawl"], folders.out
    counters = result["read"]["counters"].get("read-archive", {})
    print(format_c4_summary(result["c4"]))
    print()
    print(format_webtext_summary(result["webtext"]))
    print()
    print(format_audit(result["audit"]))
    print(format_decontaminate(result["decontaminated"]))
    print()
    print(format_tokenize(result["tokenize"]))
    print()
    print(format_training(result["train"]))
    print(f"sample       {result['sample']!r}")
    print()
    print(format_finetune(result["finetune"]))
    print()
    print(format_eval(result["eval"]))
    print()
    print(format_stats(stats))
    print()
    object_store = result["object_store"]
    docs_dir, c4_dir, webtext_dir, tokens_dir = folders.documents, folders.c4, folders.webtext, folders.tokens
    print("demo outputs")
    print(f"  sample crawl       {folders.crawl} ({len(crawl.wet_paths)} WET, {len(crawl.warc_paths)} WARC files, {crawl.pages} pages)")
    print(f"  inspection         {os.path.join(out, 'inspect.json')}")
    print(f"  document shards    {docs_dir} ({', '.join(sorted(os.path.basename(s) for s in find_shards(docs_dir)))})")
    print(f"  read counters      {json.dumps(counters)}")
    print(f"  C4 en corpus       {c4_dir} ({', '.join(f + '/' for f in sorted(os.listdir(c4_dir)) if f in FORMATS)}: "
          f"{', '.join(sorted(os.path.basename(s) for s in find_shards(c4_dir)))})")
    print(f"  C4 counters        {os.path.join(c4_dir, STATS_FILE)}")
    print(f"  C4 manifest        {os.path.join(c4_dir, '_SUCCESS')} ({object_store['files']} files with size and sha256, written last)")
    print(f"  C4 via memory://   {object_store['summary']}")
    print(f"  C4 on Spark        {folders.c4_spark}: {result['spark']['summary']}")
    print(f"  WebText corpus     {webtext_dir} (links/, {', '.join(sorted(os.path.relpath(s, webtext_dir) for s in find_shards(webtext_dir)))}, {STATS_FILE})")
    print(f"  overlap audit      {folders.audit} (report.html, report.md, report.json, bloom/)")
    print(f"  decontaminated C4  {os.path.join(out, 'c4-decontaminated')} ({REMOVED_FILE}, {STATS_FILE})")
    print(f"  token shards       {tokens_dir} (meta.json, tokenizer/, {', '.join(sorted(f for f in os.listdir(tokens_dir) if f.endswith('.bin')))})")
    print(f"  tiny GPT-2 run     {folders.model} (ckpt.pt, metrics.jsonl, loss.png, hf/)")
    print(f"  fine-tuned model   {os.path.join(folders.finetune, 'run')} (report.md, metrics.jsonl, loss.png, hf/); task in {os.path.join(folders.finetune, 'task')}")
    print(f"  evaluation report  {folders.eval} (report.html, report.md, report.json)")
    print(f"  corpus statistics  {os.path.join(out, 'corpus-stats.json')}")
    print(f"  length histogram   {folders.png}")
    if result["punkt_stand_in"]:
        print(f"  punkt stand-in     {result['punkt_stand_in']} (NLTK's English model is not installed: {PUNKT_INSTALL_COMMAND})")


def run_demo(out: str, seed: int = 0, pages: int = 300) -> dict:
    """Every stage in order; prints the report and returns each stage's result."""
    folders = DemoFolders.under(out)
    crawl = build_sample(folders, seed, pages)
    inspect_crawl(folders, crawl)
    read_stats = read_crawl(folders, crawl)
    punkt_stand_in = _ensure_sentence_model(folders.documents, folders.punkt)
    with punkt_data_environment(punkt_stand_in):  # Spark's workers load the stand-in too
        c4_stats, object_store = build_c4(folders, crawl)
        spark = build_c4_on_spark(folders, crawl)
    webtext_stats = build_webtext(folders, crawl)
    audit_result, decontaminated = audit_c4(folders, crawl)
    tokenized = tokenize_c4(folders)
    training, sample_text = train_tiny_gpt2(folders, seed)
    finetuned = finetune_tiny_gpt2(folders, seed)
    evaluation = evaluate_model(folders, crawl, seed)
    stats = corpus_statistics(folders)
    result = {"crawl": crawl, "read": read_stats, "c4": c4_stats, "object_store": object_store, "spark": spark, "webtext": webtext_stats,
              "audit": audit_result, "decontaminated": decontaminated, "stats": stats.to_dict(), "png": folders.png,
              "tokenize": tokenized, "train": training, "sample": sample_text, "finetune": finetuned,
              "eval": evaluation, "punkt_stand_in": punkt_stand_in}
    print_report(folders, result, stats)
    return result


# --- ``corpusforge demo`` (pipelines.cli) ------------------------------------------------------
def run(args: argparse.Namespace) -> dict:
    return run_demo(args.out, seed=args.seed, pages=args.pages)


def format_summary(result: dict) -> str:
    """Nothing more to print: ``run_demo`` printed the report."""
    return ""
