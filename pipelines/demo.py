"""``corpusforge demo``: the bundled sample crawl through every job that exists, offline.

1. generate the sample crawl (WET, WARC, manifests, a Pushshift-style dump), seeded;
2. inspect every crawl file (records by type, MIME, language header, errors);
3. read the WET files listed in the manifest into C4-style JSON and Parquet shards with
   the Beam DirectRunner (errors output and stats.json included);
4. build C4 (``en``, the reference's line dedup) from the WET manifest with Beam:
   ``c4-train``/``c4-validation`` JSON and Parquet shards, stats.json, the summary table;
5. build WebText from the sample's Pushshift dump (.zst) joined against the sample WARC
   files (the offline, reproducible way): link table, WARC text through newspaper3k +
   trafilatura, cleaning, exact and MinHash near-duplicate dedup, shards with metadata;
6. audit the C4 corpus against the sample's benchmark (passages of pages C4 kept, and of
   pages it dropped): 8-gram Bloom filter at 1e-8 and the exact index, compared; JSON,
   Markdown and HTML reports; then decontaminate the corpus against it;
7. tokenize the C4 corpus with Beam: train a small byte-level BPE vocabulary on it and
   write llm.c token shards (train/val);
8. train a tiny GPT-2 on those shards for a few steps on the CPU (checkpoint, metrics,
   loss curve, Hugging Face export) and sample a few tokens from it;
9. evaluate it on the sample benchmark, every metric reported on all / clean / dirty
   examples, dirty meaning 8-gram overlap found by the audit of step 6 (JSON, Markdown,
   HTML report);
10. corpus statistics of the C4 shards and a document-length histogram (PNG).
"""

from __future__ import annotations

import json
import logging
import os
import shutil

from tqdm import tqdm

log = logging.getLogger(__name__)

DEMO_VOCAB = 1024  # a vocabulary the sample corpus can fill (GPT-2's is 50,257)
DEMO_MODEL = ["--model", "gpt2", "--n_layer", "2", "--n_head", "2", "--n_embd", "64", "--block_size", "64",
              "--batch_tokens", "2048", "--micro_batch", "16"]
DEMO_MODEL_DESC = "2 layers, 64 wide, context 64"
DEMO_STEPS = 40


def _compare_manifests(local: str, remote: str) -> dict:
    """The two runs' ``_SUCCESS`` manifests, file by file (names, sizes, sha256)."""
    from common import memfs, storage

    ours, theirs = storage.read_success(local)["files"], storage.read_success(remote)["files"]
    shards = ours
    same = [f for f in shards if f in theirs]
    memfs.clear()
    summary = (f"{len(same)} of {len(shards)} files byte-identical to the local run" if len(same) == len(shards)
               else f"DIFFERENT from the local run: {sorted(f['name'] for f in shards if f not in same)}")
    return {"files": len(ours), "identical": len(same) == len(shards), "summary": summary}


def _ensure_sentence_model(docs_dir: str) -> None:
    """C4 counts punkt sentences. Without NLTK's English model installed, the demo trains a
    punkt model on its own sample pages (unsupervised, as punkt is) and says so."""
    from corpus.sentences import PUNKT_INSTALL_COMMAND, PunktMissingError, require_punkt, use_trained_punkt
    from corpus.shards import find_shards, read_documents

    try:
        require_punkt()
    except PunktMissingError:
        log.warning("NLTK's English punkt model is not installed: the demo trains a punkt model on its sample pages "
                    "instead. Sentence counts of a real corpus need the real model: %s", PUNKT_INSTALL_COMMAND)
        use_trained_punkt(doc.text for doc in read_documents(find_shards(docs_dir)))


def run_demo(out: str, seed: int = 0, pages: int = 300) -> dict:
    from samplecrawl.crawl import write_sample_crawl
    from corpus.shards import find_shards, read_documents
    from corpus.stats import compute_stats, format_stats, plot_length_histogram
    from corpus.warc import inspect_archive
    from pipelines.audit import format_audit, format_decontaminate, run_audit, run_decontaminate
    from pipelines.c4 import format_summary
    from pipelines.c4 import run as run_c4
    from pipelines.read import run as run_read
    from pipelines.webtext import format_summary as format_webtext_summary
    from pipelines.webtext import run as run_webtext
    from pipelines.jobs import write_json
    from pipelines.tokenize import format_summary as format_tokenize
    from pipelines.tokenize import run as run_tokenize

    import torch

    from model.checkpoint import load_model, tokenizer_folder
    from model.eval_report import format_summary as format_eval
    from model.harness import run_eval
    from model.sample import generate
    from model.tokenizer import BPETokenizer
    from model.train import config_from_args, train
    from model.train import format_summary as format_training

    os.makedirs(out, exist_ok=True)
    crawl_dir = os.path.join(out, "sample-crawl")
    log.info("1/10 generating the sample crawl (seed %d, %d pages) in %s", seed, pages, crawl_dir)
    crawl = write_sample_crawl(crawl_dir, seed=seed, pages=pages)

    log.info("2/10 inspecting %d crawl files", len(crawl.wet_paths) + len(crawl.warc_paths))
    inspection = {}
    for path in tqdm(crawl.wet_paths + crawl.warc_paths, desc="inspect", unit="file"):
        summary = inspect_archive(path).to_dict()
        inspection[os.path.basename(path)] = {k: summary[k] for k in ("records", "mime_types", "languages", "errors")}
    write_json(os.path.join(out, "inspect.json"), inspection)

    docs_dir = os.path.join(out, "documents")
    log.info("3/10 reading the WET manifest into shards with Beam (DirectRunner) in %s", docs_dir)
    read_stats = run_read(
        ["--input", crawl.manifest_path, "--base_url", crawl_dir, "--output", docs_dir, "--overwrite",
         "--format", "c4json", "parquet", "--num_shards", "2", "--name", "sample"]
    )

    _ensure_sentence_model(docs_dir)
    c4_dir = os.path.join(out, "c4")
    log.info("4/10 building C4 en from the WET manifest with Beam (DirectRunner) in %s", c4_dir)
    c4_stats = run_c4(
        ["--input", crawl.manifest_path, "--base_url", crawl_dir, "--output", c4_dir, "--overwrite", "--badwords", crawl.badwords_path,
         "--format", "c4json", "parquet", "--num_shards", "2"]
    )

    log.info("4/10 the same C4 job once more into memory://, an in-process object store (S3 and GCS work the same way)")
    c4_memory = "memory://demo/c4"
    run_c4(["--input", crawl.manifest_path, "--base_url", crawl_dir, "--output", c4_memory, "--badwords", crawl.badwords_path,
            "--format", "c4json", "parquet", "--num_shards", "2"])
    object_store = _compare_manifests(c4_dir, c4_memory)

    webtext_dir = os.path.join(out, "webtext")
    log.info("5/10 building WebText: Reddit links joined against the sample WARC files, in %s", webtext_dir)
    webtext_stats = run_webtext(
        ["--submissions", crawl.submissions_zst_path, "--pages", "crawl", "--warc", *crawl.warc_paths,
         "--output", webtext_dir, "--overwrite", "--format", "parquet", "jsonl"]
    )

    audit_dir = os.path.join(out, "audit")
    log.info("6/10 auditing the C4 corpus against the sample benchmark, in %s", audit_dir)
    benchmark = f"jsonl:{crawl.benchmark_path}:text"
    audit_result = run_audit(["--corpus", c4_dir, "--benchmark", benchmark, "--output", audit_dir, "--overwrite",
                              "--corpus_name", "C4 (sample crawl)", "--fp_queries", "1000000"])
    decontaminated = run_decontaminate(["--corpus", c4_dir, "--benchmark", benchmark, "--output", os.path.join(out, "c4-decontaminated"), "--overwrite",
                                        "--mode", "spans"])

    tokens_dir = os.path.join(out, "tokens")
    log.info("7/10 tokenizing the C4 corpus (a %d-token byte-level BPE trained on it) into %s", DEMO_VOCAB, tokens_dir)
    tokenized = run_tokenize(["--input", c4_dir, "--output", tokens_dir, "--overwrite", "--vocab_size", str(DEMO_VOCAB),
                              "--val_docs", "4", "--prefix", "c4"])

    run_dir = os.path.join(out, "model")
    log.info("8/10 training a tiny GPT-2 (%s) for %d steps on the CPU in %s", DEMO_MODEL_DESC, DEMO_STEPS, run_dir)
    if os.path.exists(os.path.join(run_dir, "ckpt.pt")):
        shutil.rmtree(run_dir)  # a rerun of the demo trains afresh
    training = train(config_from_args(["--data", tokens_dir, "--out", run_dir, *DEMO_MODEL, "--max_steps", str(DEMO_STEPS),
                                       "--eval_interval", str(DEMO_STEPS // 2), "--ckpt_interval", str(DEMO_STEPS),
                                       "--log_interval", "10", "--device", "cpu", "--seed", str(seed)]))
    model = load_model(run_dir)
    tokenizer = BPETokenizer.load(tokenizer_folder(run_dir))
    prompt = tokenizer.encode("The ")
    generator = torch.Generator().manual_seed(seed)
    continuation = generate(model, torch.tensor([prompt]), 24, temperature=0.8, top_k=40, generator=generator)
    sample_text = tokenizer.decode(continuation[0].tolist())

    eval_dir = os.path.join(out, "eval")
    log.info("9/10 evaluating the model on the sample benchmark (all / clean / dirty by the audit), in %s", eval_dir)
    evaluation = run_eval(run_dir, [benchmark], training=audit_dir, bootstrap=200, seed=seed, report=eval_dir, progress=False)

    log.info("10/10 corpus statistics of the C4 shards")
    shards = find_shards(os.path.join(c4_dir, "c4-*.json.gz"))
    stats = compute_stats(read_documents(shards))
    png = os.path.join(out, "document-lengths.png")
    plot_length_histogram(stats, png, title=f"C4 from the sample crawl: {stats.documents} documents")
    write_json(os.path.join(out, "corpus-stats.json"), stats.to_dict())

    counters = read_stats["counters"].get("read-archive", {})
    print(format_summary(c4_stats))
    print()
    print(format_webtext_summary(webtext_stats))
    print()
    print(format_audit(audit_result))
    print(format_decontaminate(decontaminated))
    print()
    print(format_tokenize(tokenized))
    print()
    print(format_training(training))
    print(f"sample       {sample_text!r}")
    print()
    print(format_eval(evaluation))
    print()
    print(format_stats(stats))
    print()
    print("demo outputs")
    print(f"  sample crawl       {crawl_dir} ({len(crawl.wet_paths)} WET, {len(crawl.warc_paths)} WARC files, {crawl.pages} pages)")
    print(f"  inspection         {os.path.join(out, 'inspect.json')}")
    print(f"  document shards    {docs_dir} ({', '.join(sorted(os.path.basename(s) for s in find_shards(docs_dir)))})")
    print(f"  read counters      {json.dumps(counters)}")
    print(f"  C4 en corpus       {c4_dir} ({', '.join(sorted(os.path.basename(s) for s in find_shards(c4_dir)))})")
    print(f"  C4 counters        {os.path.join(c4_dir, 'stats.json')}")
    print(f"  C4 manifest        {os.path.join(c4_dir, '_SUCCESS')} ({object_store['files']} files with size and sha256, written last)")
    print(f"  C4 via memory://   {object_store['summary']}")
    print(f"  WebText corpus     {webtext_dir} (links/, {', '.join(sorted(os.path.basename(s) for s in find_shards(webtext_dir)))}, stats.json)")
    print(f"  overlap audit      {audit_dir} (report.html, report.md, report.json, bloom/)")
    print(f"  decontaminated C4  {os.path.join(out, 'c4-decontaminated')} (removed.jsonl, stats.json)")
    print(f"  token shards       {tokens_dir} (meta.json, tokenizer/, {', '.join(sorted(f for f in os.listdir(tokens_dir) if f.endswith('.bin')))})")
    print(f"  tiny GPT-2 run     {run_dir} (ckpt.pt, metrics.jsonl, loss.png, hf/)")
    print(f"  evaluation report  {eval_dir} (report.html, report.md, report.json)")
    print(f"  corpus statistics  {os.path.join(out, 'corpus-stats.json')}")
    print(f"  length histogram   {png}")
    return {"crawl": crawl, "read": read_stats, "c4": c4_stats, "object_store": object_store, "webtext": webtext_stats, "audit": audit_result, "decontaminated": decontaminated, "stats": stats.to_dict(), "png": png,
            "tokenize": tokenized, "train": training, "sample": sample_text, "eval": evaluation}
