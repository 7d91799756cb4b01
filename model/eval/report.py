"""The evaluation report: every benchmark's metrics on all / clean / dirty examples, as
JSON (for machines), Markdown, and one self-contained HTML page.

Document (``build_report``; ``FORMAT``/``VERSION`` below)::

    format, version
    model        {"path", "size" (GPT-2 paper size when the shape matches one), "config", ...}
    training     {"source", "kind", "n", "threshold", ...} or null (no corpus: "all" only)
    settings     {"resamples", "confidence", "seed", "context", "stride", "limit", ...}
    notes        [str]
    benchmarks   [{"name", "kind", "split", "examples", "metrics" (primary first),
                   "results": [{"metric", "all", "clean", "dirty", "relative_difference",
                                "buckets"}],          (each subset: count, value, ci_low, ci_high)
                   "contamination": {...} or null,    (model.eval.contamination.ContaminationMarks)
                   "reference": {"label", "values": {metric: number}} or null,
                   "per_example": [...]}]

Accuracies are stored as fractions (0-1) and shown as percentages, as the papers print
them; ``relative_difference`` is GPT-3 Table C.1's "relative difference clean vs all",
``100 * (clean - all) / all``. Non-finite numbers are written as JSON ``null``.

The HTML page has, per benchmark, a table (metric x all / clean / dirty with counts and
bootstrap intervals) and a plot of each metric against the overlap-fraction bucket
(matplotlib, Agg backend, embedded as a base64 PNG). Files are written atomically
(``common.storage``), and only after all three are rendered, so a failed run never leaves
a half-written report.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os

from common import storage
from common.storage import write_atomically
from dedup.report import html_escape, html_table, json_safe

FORMAT = "corpusforge-eval-report"
VERSION = 1
MISSING = "–"
REPORT_FILES = {"json": "report.json", "markdown": "report.md", "html": "report.html"}
SUBSETS = ("all", "clean", "dirty")
# GPT-2 paper sizes (Radford et al. 2019, Table 2) by (n_layer, n_embd).
GPT2_SIZES = {(12, 768): "117M", (24, 1024): "345M", (36, 1280): "762M", (48, 1600): "1542M"}
METRIC_LABELS = {"token_ppl": "token perplexity", "word_ppl": "word perplexity", "bpb": "bits per byte",
                 "bpc": "bits per character", "lastword_ppl": "last-word perplexity", "mean_nll": "mean NLL (nats)"}


def gpt2_size(config: dict | None) -> str | None:
    """The GPT-2 paper size ("117M", ...) a model config has the shape of, or None."""
    if not config or config.get("arch", "gpt2") != "gpt2":
        return None
    return GPT2_SIZES.get((config.get("n_layer"), config.get("n_embd")))


GENERATIVE_LABELS = {"mean:f1": "F1 (CoQA official)", "mean:em": "exact match (CoQA official)",
                     "bleu": "BLEU (sacrebleu)"}
ROUGE_LABELS = {"rouge1": "ROUGE-1 F1", "rouge2": "ROUGE-2 F1", "rougeL": "ROUGE-L F1"}
SUMMARY_LABELS = {"tldr": "TL;DR:", "no_hint": "no hint", "lead3": "lead-3", "random3": "random-3"}


def _percent(metric: str) -> bool:
    return metric.startswith(("acc:", "conf_acc:"))


def metric_label(metric: str) -> str:
    if metric.startswith("acc:"):
        return f"accuracy ({metric[4:].replace('_', ' ')}, %)"
    if metric.startswith("conf_acc:"):
        percent, _, protocol = metric[9:].partition(":")
        return f"accuracy on the {percent}% most confident ({protocol.replace('_', ' ')}, %)"
    parts = metric.split(":")
    if len(parts) == 3 and parts[0] == "mean" and parts[2] in ROUGE_LABELS:
        return f"{ROUGE_LABELS[parts[2]]} ({SUMMARY_LABELS.get(parts[1], parts[1])})"
    if len(parts) == 3 and parts[:2] == ["mean", "f1"]:
        return f"F1, {parts[2].replace('_', ' ')}"
    return GENERATIVE_LABELS.get(metric, METRIC_LABELS.get(metric, metric))


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def shown(metric: str, value) -> float | None:
    """The number as printed: accuracies in percent."""
    if not _finite(value):
        return None
    return 100.0 * value if _percent(metric) else float(value)


def fmt_value(metric: str, value) -> str:
    v = shown(metric, value)
    if v is None:
        return MISSING
    return f"{v:.2f}" if 0.01 <= abs(v) < 1e5 or v == 0 else f"{v:.3e}"


def fmt_subset(metric: str, subset: dict | None) -> str:
    """``value [low, high] (n=count)``; ``–`` for no subset or an empty one."""
    if not subset:
        return MISSING
    if not subset["count"]:
        return f"{MISSING} (n=0)"
    ci = ""
    if _finite(subset.get("ci_low")) and _finite(subset.get("ci_high")):
        ci = f" [{fmt_value(metric, subset['ci_low'])}, {fmt_value(metric, subset['ci_high'])}]"
    return f"{fmt_value(metric, subset['value'])}{ci} (n={subset['count']:,})"


def fmt_relative(value) -> str:
    return f"{value:+.2f}%" if _finite(value) else MISSING


# ----------------------------------------------------------------------------- document

def benchmark_entry(summary, *, kind: str = "", split: str = "", reference: dict | None = None,
                    per_example: list[dict] | None = None, meta: dict | None = None) -> dict:
    """One benchmark of the document from a ``model.eval.contamination.BenchmarkSummary``."""
    data = summary.to_dict()
    return {"name": data["name"], "kind": kind, "split": split, "examples": data["examples"],
            "metrics": data["metrics"], "results": data["results"], "contamination": data["contamination"],
            "reference": reference, "per_example": per_example or [], "meta": dict(meta or {})}


def build_report(benchmarks: list[dict], *, model: dict | None = None, training: dict | None = None,
                 settings: dict | None = None, notes: list[str] | None = None) -> dict:
    """The whole report document (JSON-ready: non-finite floats become None)."""
    return json_safe({"format": FORMAT, "version": VERSION, "model": dict(model or {}),
                      "training": training, "settings": dict(settings or {}), "notes": list(notes or []),
                      "benchmarks": list(benchmarks)})


def load_report(path: str | os.PathLike) -> dict:
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    return document


def _title(document: dict) -> str:
    model = document.get("model") or {}
    name = model.get("name") or model.get("path") or "model"
    return f"Zero-shot evaluation of {name}"


def _training_line(document: dict) -> str:
    training = document.get("training")
    if not training:
        return "No training corpus given: every example is reported under \"all\" only."
    threshold = training.get("threshold") or 0.0
    rule = ("any of its n-grams is found" if not threshold else
            f"at least {100 * threshold:g}% of its n-grams are found")
    return (f"Clean / dirty by {training.get('n')}-gram overlap with {training.get('source')} "
            f"({training.get('kind')}): an example is dirty when {rule}.")


def _settings_line(document: dict) -> str:
    s = document.get("settings") or {}
    parts = [f"{s.get('confidence', 0.95) * 100:g}% percentile bootstrap intervals over {s.get('resamples')} "
             f"resamples of the examples (seed {s.get('seed')})"]
    for key in ("context", "stride", "limit", "device"):
        if s.get(key) is not None:
            parts.append(f"{key} {s[key]}")
    return "; ".join(parts) + "."


def result_rows(entry: dict) -> tuple[list[str], list[list[str]]]:
    """The per-benchmark table: metric, all, clean, dirty, clean vs all, and the paper's number."""
    reference = entry.get("reference") or {}
    header = ["metric", *SUBSETS, "clean vs all"]
    if reference:
        header.append(reference.get("label", "reference"))
    rows = []
    for result in entry["results"]:
        metric = result["metric"]
        row = [metric_label(metric), *(fmt_subset(metric, result.get(subset)) for subset in SUBSETS),
               fmt_relative(result.get("relative_difference"))]
        if reference:
            row.append(fmt_value(metric, (reference.get("values") or {}).get(metric)))
        rows.append(row)
    return header, rows


def bucket_rows(entry: dict) -> tuple[list[str], list[list[str]]]:
    """Metric per overlap-fraction bucket (count and value)."""
    results = [r for r in entry["results"] if r.get("buckets")]
    if not results:
        return [], []
    labels = [b["bucket"] for b in results[0]["buckets"]]
    header = ["overlap fraction", "examples"] + [metric_label(r["metric"]) for r in results]
    rows = []
    for i, label in enumerate(labels):
        count = results[0]["buckets"][i]["count"]
        rows.append([label, f"{count:,}"] + [fmt_value(r["metric"], r["buckets"][i]["value"]) if count else MISSING
                                             for r in results])
    return header, rows


def contamination_line(entry: dict) -> str:
    c = entry.get("contamination")
    if not c:
        return "Not marked (no training corpus)."
    line = (f"{c['dirty_examples']:,} of the benchmark's {c['examples_marked']:,} examples dirty; "
            f"{c['percent_found']:.2f}% of the benchmark's unique {c['n']}-grams found ({c['source_kind']}: {c['source']}).")
    ev = c.get("fp_evidence") or {}
    if _finite(ev.get("estimated_fp_rate")):
        line += f" Bloom false-positive evidence: fill^k estimate {ev['estimated_fp_rate']:.2e}"
        if ev.get("empirical_queries"):
            line += (f", {ev['empirical_found']} of {ev['empirical_queries']:,} random keys found "
                     f"(95% upper bound {ev['empirical_upper_95']:.1e})")
        line += "."
    return line


def generation_lines(entry: dict) -> list[str]:
    """What a generative task's report says about how it ran (example pairs, BLEU signature)."""
    meta = entry.get("meta") or {}
    lines = []
    if meta.get("example_pairs"):
        lines.append(f"Example pairs: {meta['example_pairs']}.")
    if meta.get("bleu_signature"):
        lines.append(f"sacrebleu signature: {meta['bleu_signature']}")
    if meta.get("contexts_cut"):
        lines.append(f"{meta['contexts_cut']} context(s) cut from the left to fit the window (the task prompt kept).")
    return lines


def confident_rows(entry: dict) -> tuple[list[str], list[list[str]]]:
    """NQ: the most confident answers (GPT-2 Table 5's listing)."""
    rows = [[row["question"], row["answer"], f"{100 * row['probability']:.1f}%", "yes" if row["correct"] else "no"]
            for row in entry.get("most_confident") or []]
    return ["question", "generated answer", "probability", "correct"], rows


def _dirty_preview(entry: dict, top: int = 10) -> list[str]:
    ids = (entry.get("contamination") or {}).get("dirty_ids") or []
    return ids[:top]


# ----------------------------------------------------------------------------- text

def format_summary(document: dict) -> str:
    """The one-screen table the command prints (columns as wide as their widest cell)."""
    rows = [["benchmark", "metric", *SUBSETS, "clean vs all"]]
    for entry in document["benchmarks"]:
        for result in entry["results"]:
            metric = result["metric"]
            rows.append([entry["name"], metric, *(fmt_subset(metric, result.get(subset)) for subset in SUBSETS),
                         fmt_relative(result.get("relative_difference"))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [_title(document), _training_line(document)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    for entry in document["benchmarks"]:
        lines += [f"{entry['name']}: {line}" for line in generation_lines(entry)]
    return "\n".join(lines)


def _md(text) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]


def render_markdown(document: dict) -> str:
    lines = [f"# {_title(document)}", "", _training_line(document), "", _settings_line(document), ""]
    lines += [f"- {note}" for note in document.get("notes") or []]
    if document.get("notes"):
        lines.append("")
    for entry in document["benchmarks"]:
        lines += [f"## {entry['name']}", "", contamination_line(entry), ""]
        lines += _md_table(*result_rows(entry)) + [""]
        lines += [line + "\n" for line in generation_lines(entry)]
        header, rows = confident_rows(entry)
        if rows:
            lines += [f"The {len(rows)} most confident answers:", ""] + _md_table(header, rows) + [""]
        header, rows = bucket_rows(entry)
        if rows:
            lines += ["Metric by overlap fraction (share of the example's n-grams found):", ""]
            lines += _md_table(header, rows) + [""]
        dirty = _dirty_preview(entry)
        if dirty:
            lines += ["Dirty examples (first 10): " + ", ".join(f"`{i}`" for i in dirty), ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- HTML

def plot_buckets(entry: dict) -> bytes | None:
    """PNG: each metric against the overlap bucket (bootstrap intervals as error bars, the
    all-examples value as a dashed line, counts under the x labels); None without buckets."""
    results = [r for r in entry["results"] if r.get("buckets")]
    if not results:
        return None
    import matplotlib  # about 0.3 s: only when a report has buckets to plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), squeeze=False)
    for ax, result in zip(axes[0], results, strict=True):
        metric = result["metric"]
        labels = [f"{b['bucket']}\nn={b['count']:,}" for b in result["buckets"]]
        xs, ys, lows, highs = [], [], [], []
        for i, b in enumerate(result["buckets"]):
            y = shown(metric, b["value"])
            if b["count"] and y is not None:
                low, high = shown(metric, b.get("ci_low")), shown(metric, b.get("ci_high"))
                xs.append(i)
                ys.append(y)
                lows.append(y - low if low is not None else 0.0)
                highs.append(high - y if high is not None else 0.0)
        if xs:
            ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o", color="#3b6fb6", capsize=4)
        everything = shown(metric, result["all"]["value"])
        if everything is not None:
            ax.axhline(everything, color="#888", linestyle="--", linewidth=1, label="all examples")
            ax.legend(fontsize=8, loc="best")
        if metric.endswith("_ppl") and ys and min(ys) > 0:
            ax.set_yscale("log")  # perplexities span orders of magnitude
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_xlim(-0.5, len(labels) - 0.5)
        ax.set_xlabel("share of the example's n-grams found", fontsize=8)
        ax.set_title(metric_label(metric), fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle(entry["name"], fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
section.benchmark { margin-bottom: 2.5em; } img.plot { max-width: 100%; }
"""


def render_html(document: dict) -> str:
    """The self-contained page: per benchmark a ``results`` table, a ``buckets`` table and
    its plot (``<img class="plot">``, a data: URI)."""
    title = _title(document)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"/>', f"<title>{html_escape(title)}</title>",
           f"<style>{_CSS}</style></head><body>", f"<h1>{html_escape(title)}</h1>",
           f"<p>{html_escape(_training_line(document))}</p>", f"<p>{html_escape(_settings_line(document))}</p>"]
    if document.get("notes"):
        out.append("<ul>" + "".join(f"<li>{html_escape(note)}</li>" for note in document["notes"]) + "</ul>")
    for entry in document["benchmarks"]:
        out.append(f'<section class="benchmark" id="{html_escape(entry["name"])}"><h2>{html_escape(entry["name"])}</h2>')
        out.append(f"<p>{html_escape(contamination_line(entry))}</p>")
        out.append(html_table(*result_rows(entry), "results"))
        out.extend(f"<p>{html_escape(line)}</p>" for line in generation_lines(entry))
        header, rows = confident_rows(entry)
        if rows:
            out.append(f"<p>The {len(rows)} most confident answers:</p>" + html_table(header, rows, "confident"))
        header, rows = bucket_rows(entry)
        if rows:
            out.append(html_table(header, rows, "buckets"))
            png = plot_buckets(entry)
            if png:
                data = base64.b64encode(png).decode("ascii")
                out.append(f'<img class="plot" alt="{html_escape(entry["name"])}: metric by overlap fraction" '
                           f'src="data:image/png;base64,{data}"/>')
        dirty = _dirty_preview(entry)
        if dirty:
            out.append("<p>Dirty examples (first 10): " + ", ".join(f"<code>{html_escape(i)}</code>" for i in dirty) + "</p>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(document: dict, out_dir: str | os.PathLike) -> dict[str, str]:
    """Render JSON, Markdown and HTML, then write each atomically into ``out_dir``."""
    rendered = {"json": json.dumps(json_safe(document), indent=2, sort_keys=True, ensure_ascii=False,
                                   allow_nan=False) + "\n",
                "markdown": render_markdown(document), "html": render_html(document)}
    storage.makedirs(os.fspath(out_dir))  # a local folder only: an object store has none to make
    paths = {}
    for key, text in rendered.items():
        paths[key] = storage.join(os.fspath(out_dir), REPORT_FILES[key])
        write_atomically(paths[key], text)
    return paths
