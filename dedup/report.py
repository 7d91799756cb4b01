"""The contamination audit's report: JSON (for machines), Markdown and self-contained HTML.

Input: a list of per-benchmark report dicts, in the order to show them. Keys
(``REQUIRED_KEYS`` must be present; the rest are optional):

- ``name`` (str): the benchmark key (``ptb``, ``wikitext2``, ``wikitext103``, ``enwik8``,
  ``text8``, ``1bw``, ``lambada``, ``wsc273``, ... or any name); ``DISPLAY_NAMES`` gives
  the column header and ``GPT2_TABLE6`` the paper's numbers for it.
- ``n`` (int), ``unique_ngrams`` (int), ``unique_found`` (int),
  ``percent_found`` (float, 0-100: % of the unique n-grams found),
  ``token_weighted_percent`` (float, 0-100: % counting every occurrence),
  ``examples``, ``dirty_examples``, ``clean_examples`` (ints), ``longest_run`` (int: the
  most consecutive found n-grams anywhere in the benchmark),
- ``fp_evidence`` (dict): ``estimated_fp_rate`` ((fill ratio)^k), ``empirical_found``,
  ``empirical_queries``, ``empirical_upper_95`` (a missing sub-key shows as "–"),
- optional: ``own_train_percent`` (float, 0-100: the same % against the benchmark's own
  training split, GPT-2 Table 6's first row), ``corpus`` (the training corpus' name),
  ``per_example`` (list of rows ``{"id", "ngrams", "found", "fraction", "dirty",
  "longest_run"}``; ``fraction`` is 0-1).

Numbers print as percentages with 2 decimals (like the paper), FP rates as ``1.23e-08``,
and a missing or ``None`` value as ``–``. Files are written atomically.
"""

from __future__ import annotations

import html
import json
import math
import os
from typing import TypeGuard

from common.storage import write_atomically

REQUIRED_KEYS = ("name", "n", "unique_ngrams", "unique_found", "percent_found", "token_weighted_percent",
                 "examples", "dirty_examples", "clean_examples", "longest_run", "fp_evidence")
JSON_FORMAT = "corpusforge-contamination-report"
JSON_VERSION = 1
MISSING = "–"
TOP_DIRTY = 10

# GPT-2 paper (Radford et al. 2019), Table 6: % of each test set's 8-grams found in a training set.
GPT2_TABLE6 = {
    "ptb": {"own_train": 2.67, "webtext": 0.88},
    "wikitext2": {"own_train": 0.66, "webtext": 1.63},
    "enwik8": {"own_train": 7.50, "webtext": 6.31},
    "text8": {"own_train": 2.34, "webtext": 3.94},
    "wikitext103": {"own_train": 9.09, "webtext": 2.42},
    "1bw": {"own_train": 13.19, "webtext": 3.75},
}
# GPT-2 paper, section 4 (no Table 6 column): other overlap figures it reports.
GPT2_NOTES = (
    "LAMBADA: 1.2% average 8-gram overlap with WebText train; excluding every example with any "
    "overlap moves GPT-2's perplexity 8.6 -> 8.7 and accuracy 63.2% -> 62.9%.",
    "Winograd: 10 schemata with any 8-gram overlap with WebText train, 2 of them spurious.",
)
DISPLAY_NAMES = {"ptb": "PTB", "wikitext2": "WikiText-2", "enwik8": "enwik8", "text8": "text8",
                 "wikitext103": "WikiText-103", "1bw": "1BW", "lambada": "LAMBADA", "wsc273": "WSC273",
                 "wsc": "WSC", "cbt-cn": "CBT-CN", "cbt-ne": "CBT-NE"}
OWN_TRAIN_ROW = "the dataset's own train split"
PAPER_OWN_ROW = "the dataset's own train split (GPT-2 paper)"
PAPER_WEBTEXT_ROW = "WebText train (GPT-2 paper)"
DEFAULT_CORPUS = "training corpus"


# ----------------------------------------------------------------------------- shared

def validate_reports(reports) -> list[dict]:
    """The reports as a list, or ``ValueError`` naming the first report and key missing."""
    reports = list(reports)
    for index, report in enumerate(reports):
        if not isinstance(report, dict):
            raise ValueError(f"report {index} is not a dict")
        missing = [key for key in REQUIRED_KEYS if key not in report]
        if missing:
            raise ValueError(f"report {index} ({report.get('name', '?')}) lacks {', '.join(missing)}")
        if not isinstance(report["fp_evidence"], dict):
            raise ValueError(f"report {index} ({report['name']}): fp_evidence is not a dict")
    return reports


def display_name(name: str) -> str:
    return DISPLAY_NAMES.get(name, name)


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt_percent(value) -> str:
    return f"{value:.2f}" if _finite(value) else MISSING


def fmt_rate(value) -> str:
    return f"{value:.2e}" if _finite(value) else MISSING


def fmt_int(value) -> str:
    return f"{value:,}" if _finite(value) else MISSING


def fmt_fraction(value) -> str:
    return f"{value:.3f}" if _finite(value) else MISSING


def corpus_label(reports: list[dict], corpus_name: str | None) -> str:
    if corpus_name:
        return corpus_name
    return next((r["corpus"] for r in reports if r.get("corpus")), DEFAULT_CORPUS)


def table_rows(reports: list[dict], corpus_name: str | None = None) -> list[tuple[str, list[str]]]:
    """The GPT-2-Table-6-like rows: ``(label, one formatted value per report)``."""
    rows = []
    if any(_finite(r.get("own_train_percent")) for r in reports):
        rows.append((OWN_TRAIN_ROW, [fmt_percent(r.get("own_train_percent")) for r in reports]))
    rows.append((corpus_label(reports, corpus_name), [fmt_percent(r["percent_found"]) for r in reports]))
    if any(r["name"] in GPT2_TABLE6 for r in reports):
        rows.append((PAPER_OWN_ROW, [fmt_percent(GPT2_TABLE6.get(r["name"], {}).get("own_train")) for r in reports]))
        rows.append((PAPER_WEBTEXT_ROW, [fmt_percent(GPT2_TABLE6.get(r["name"], {}).get("webtext")) for r in reports]))
    return rows


def _n_label(reports: list[dict]) -> str:
    ns = {r["n"] for r in reports}
    return f"{ns.pop()}-grams" if len(ns) == 1 else "n-grams"


def _headers(reports: list[dict]) -> list[str]:
    same_n = len({r["n"] for r in reports}) == 1
    return [display_name(r["name"]) + ("" if same_n else f" (n={r['n']})") for r in reports]


def summary_rows(reports: list[dict]) -> tuple[list[str], list[list[str]]]:
    header = ["benchmark", "n", "unique n-grams", "found", "% found", "% token-weighted",
              "examples", "dirty", "clean", "longest run"]
    rows = [[display_name(r["name"]), str(r["n"]), fmt_int(r["unique_ngrams"]), fmt_int(r["unique_found"]),
             fmt_percent(r["percent_found"]), fmt_percent(r["token_weighted_percent"]), fmt_int(r["examples"]),
             fmt_int(r["dirty_examples"]), fmt_int(r["clean_examples"]), fmt_int(r["longest_run"])]
            for r in reports]
    return header, rows


def fp_rows(reports: list[dict]) -> tuple[list[str], list[list[str]]]:
    header = ["benchmark", "estimated FP rate (fill ratio^k)", "empirical found / queries", "95% upper bound"]
    rows = []
    for r in reports:
        fp = r["fp_evidence"]
        found, queries = fp.get("empirical_found"), fp.get("empirical_queries")
        rows.append([display_name(r["name"]), fmt_rate(fp.get("estimated_fp_rate")),
                     f"{fmt_int(found)} / {fmt_int(queries)}", fmt_rate(fp.get("empirical_upper_95"))])
    return header, rows


def top_dirty(report: dict, top: int = TOP_DIRTY) -> list[dict]:
    """The dirty rows of ``per_example``, most contaminated first (fraction, then longest
    run, descending; then id), at most ``top``."""
    rows = [row for row in report.get("per_example") or [] if row.get("dirty")]
    rows.sort(key=lambda row: (-(row.get("fraction") or 0), -(row.get("longest_run") or 0), str(row.get("id"))))
    return rows[:top]


DIRTY_HEADER = ["id", "n-grams", "found", "fraction", "longest run"]


def dirty_cells(row: dict) -> list[str]:
    return [str(row.get("id")), fmt_int(row.get("ngrams")), fmt_int(row.get("found")),
            fmt_fraction(row.get("fraction")), fmt_int(row.get("longest_run"))]


# ----------------------------------------------------------------------------- JSON

def json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def render_json(reports, path: str | os.PathLike) -> None:
    """Write ``{"format", "version", "reports", "gpt2_table6"}`` (sorted keys, 2-space
    indent, UTF-8); non-finite floats become ``null``. ``load_json`` reads it back."""
    reports = validate_reports(reports)
    document = {"format": JSON_FORMAT, "version": JSON_VERSION, "reports": json_safe(reports),
                "gpt2_table6": GPT2_TABLE6}
    write_atomically(path, json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")


def load_json(path: str | os.PathLike) -> list[dict]:
    """The reports of a file written by ``render_json``."""
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    if not isinstance(document, dict) or document.get("format") != JSON_FORMAT:
        raise ValueError(f"{path} is not a {JSON_FORMAT} file")
    return document["reports"]


# ----------------------------------------------------------------------------- Markdown

def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(reports, corpus_name: str | None = None, title: str = "Benchmark contamination audit",
                    top: int = TOP_DIRTY) -> str:
    """The report as Markdown: the Table-6-like table (ours, then the paper's rows), the
    paper's other notes, a per-benchmark summary, FP evidence, and the top dirty examples."""
    reports = validate_reports(reports)
    lines = [f"# {title}", ""]
    if not reports:
        return "\n".join(lines + ["No benchmarks.", ""])
    lines += [f"## % of each test set's {_n_label(reports)} found in the training data", ""]
    lines += _md_table([""] + _headers(reports), [[label, *values] for label, values in table_rows(reports, corpus_name)])
    lines += ["", "Rows marked *(GPT-2 paper)* are the published numbers of Radford et al. 2019, Table 6 "
              "(8-grams, WebText), for reference; \u2013 = not available.", ""]
    lines += [f"- GPT-2 paper: {note}" for note in GPT2_NOTES] + [""]
    lines += ["## Per-benchmark summary", ""] + _md_table(*summary_rows(reports)) + [""]
    lines += ["## False-positive evidence", ""] + _md_table(*fp_rows(reports)) + [""]
    lines += ["## Top dirty examples", ""]
    for report in reports:
        lines += [f"### {display_name(report['name'])}", ""]
        rows = top_dirty(report, top)
        if rows:
            lines += _md_table(DIRTY_HEADER, [dirty_cells(row) for row in rows])
        else:
            lines.append("No dirty examples." if report.get("per_example") is not None else "No per-example rows.")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- HTML

def html_escape(text) -> str:
    return html.escape(str(text), quote=True)


def html_table(header: list[str], rows: list[list[str]], cls: str) -> str:
    head = "".join(f"<th>{html_escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html_escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


CHART_LABEL_WIDTH = 140
CHART_BAR_WIDTH = 480
CHART_ROW_HEIGHT = 44
CHART_BAR_HEIGHT = 14


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k that is >= value (at least 1)."""
    value = max(value, 1.0)
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * 10 ** exponent >= value:
            return float(step * 10 ** exponent)
    return float(10 ** (exponent + 1))


def render_svg_chart(reports: list[dict]) -> str:
    """A horizontal bar chart: per benchmark one ``bar-unique`` bar (% of unique n-grams
    found) and one ``bar-token`` bar (token-weighted %), and a ``paper-mark`` line at the
    GPT-2 paper's WebText number where there is one."""
    values = [v for r in reports for v in (r["percent_found"], r["token_weighted_percent"],
                                            GPT2_TABLE6.get(r["name"], {}).get("webtext")) if _finite(v)]
    scale_max = _nice_max(max(values, default=1.0))
    width = CHART_LABEL_WIDTH + CHART_BAR_WIDTH + 60
    height = CHART_ROW_HEIGHT * len(reports) + 40

    def x(value: float) -> float:
        return CHART_LABEL_WIDTH + CHART_BAR_WIDTH * max(0.0, min(value, scale_max)) / scale_max

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">',
             f"<title>% of n-grams found per benchmark (scale 0 to {scale_max:g}%)</title>"]
    for index, report in enumerate(reports):
        top = 10 + index * CHART_ROW_HEIGHT
        name = display_name(report["name"])
        parts.append(f'<text x="{CHART_LABEL_WIDTH - 8}" y="{top + CHART_BAR_HEIGHT + 4}" text-anchor="end" '
                     f'class="label">{html_escape(name)}</text>')
        for offset, key, cls in ((0, "percent_found", "bar-unique"), (CHART_BAR_HEIGHT + 2, "token_weighted_percent", "bar-token")):
            value = report[key] if _finite(report[key]) else 0.0
            bar_width = x(value) - CHART_LABEL_WIDTH
            kind = "unique" if key == "percent_found" else "token-weighted"
            parts.append(f'<rect class="bar {cls}" x="{CHART_LABEL_WIDTH}" y="{top + offset}" width="{bar_width:.2f}" '
                         f'height="{CHART_BAR_HEIGHT}"><title>{html_escape(name)}: {fmt_percent(report[key])}% ({kind})</title></rect>')
            parts.append(f'<text x="{x(value) + 4:.2f}" y="{top + offset + CHART_BAR_HEIGHT - 3}" class="value">'
                         f'{fmt_percent(report[key])}</text>')
        paper = GPT2_TABLE6.get(report["name"], {}).get("webtext")
        if _finite(paper):
            parts.append(f'<line class="paper-mark" x1="{x(paper):.2f}" x2="{x(paper):.2f}" y1="{top - 2}" '
                         f'y2="{top + 2 * CHART_BAR_HEIGHT + 4}"><title>GPT-2 paper, WebText train: '
                         f'{fmt_percent(paper)}%</title></line>')
    axis_y = 10 + CHART_ROW_HEIGHT * len(reports)
    parts.append(f'<line class="axis" x1="{CHART_LABEL_WIDTH}" x2="{CHART_LABEL_WIDTH + CHART_BAR_WIDTH}" '
                 f'y1="{axis_y}" y2="{axis_y}"/>')
    for tick in (0.0, scale_max / 2, scale_max):
        parts.append(f'<text x="{x(tick):.2f}" y="{axis_y + 16}" text-anchor="middle" class="tick">{tick:g}%</text>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.paper td { color: #666; font-style: italic; }
.bar-unique { fill: #3b6fb6; } .bar-token { fill: #9fbde6; }
.paper-mark { stroke: #c0392b; stroke-width: 2; } .axis { stroke: #888; }
svg text { font-size: 12px; } .legend span { display: inline-block; width: 1em; height: 0.8em; margin: 0 0.3em; }
"""


def html_report(reports, title: str = "Benchmark contamination audit", corpus_name: str | None = None,
                top: int = TOP_DIRTY) -> str:
    """The self-contained HTML (also well-formed XML: every tag closed, no named entities)."""
    reports = validate_reports(reports)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"/>', f"<title>{html_escape(title)}</title>",
           f"<style>{_CSS}</style></head><body>", f"<h1>{html_escape(title)}</h1>"]
    if not reports:
        out.append("<p>No benchmarks.</p></body></html>")
        return "\n".join(out) + "\n"
    out.append(f"<h2>% of each test set's {html_escape(_n_label(reports))} found in the training data</h2>")
    header = "<tr><th></th>" + "".join(f"<th>{html_escape(h)}</th>" for h in _headers(reports)) + "</tr>"
    body = []
    for label, values in table_rows(reports, corpus_name):
        cls = ' class="paper"' if label in (PAPER_OWN_ROW, PAPER_WEBTEXT_ROW) else ""
        body.append(f"<tr{cls}><td>{html_escape(label)}</td>" + "".join(f"<td>{html_escape(v)}</td>" for v in values) + "</tr>")
    out.append(f'<table class="table6"><thead>{header}</thead><tbody>{"".join(body)}</tbody></table>')
    out.append("<p>Rows marked <em>(GPT-2 paper)</em> are the published numbers of Radford et al. 2019, "
               "Table 6 (8-grams, WebText), for reference; \u2013 = not available.</p>")
    out.append("<ul>" + "".join(f"<li>GPT-2 paper: {html_escape(note)}</li>" for note in GPT2_NOTES) + "</ul>")
    out.append("<h2>% of n-grams found</h2>")
    out.append('<p class="legend"><span style="background:#3b6fb6"></span>unique n-grams '
               '<span style="background:#9fbde6"></span>token-weighted '
               '<span style="background:#c0392b;width:2px"></span>GPT-2 paper, WebText train</p>')
    out.append(render_svg_chart(reports))
    out.append("<h2>Per-benchmark summary</h2>")
    out.append(html_table(*summary_rows(reports), "summary"))
    out.append("<h2>False-positive evidence</h2>")
    out.append(html_table(*fp_rows(reports), "fp"))
    out.append("<h2>Dirty examples</h2>")
    for report in reports:
        rows = top_dirty(report, top)
        dirty = report["dirty_examples"]
        summary = f"{display_name(report['name'])}: {fmt_int(dirty)} dirty of {fmt_int(report['examples'])} examples"
        if rows:
            summary += f" (top {len(rows)} shown)"
        content = (html_table(DIRTY_HEADER, [dirty_cells(row) for row in rows], "dirty") if rows
                   else "<p>No dirty examples listed.</p>")
        out.append(f'<details class="dirty-list"><summary>{html_escape(summary)}</summary>{content}</details>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def render_html(reports, path: str | os.PathLike, title: str = "Benchmark contamination audit",
                corpus_name: str | None = None, top: int = TOP_DIRTY) -> None:
    """Write ``html_report(...)`` to ``path`` atomically."""
    write_atomically(path, html_report(reports, title, corpus_name, top))
