"""``corpusforge inspect``: count the records of WARC/WET files by type, payload MIME type,
language header and error, per file and in total; ``--strict`` exits 1 when any error was found.

    corpusforge inspect 'crawl/*.wet.gz' [--json] [--strict]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from tqdm import tqdm

from corpus.inputs import expand_inputs
from corpus.warc import inspect_archive
from pipelines.options import add_manifest_path_argument

TOTALS = ("records", "mime_types", "languages", "errors")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", help="files, globs, folders, *.paths.gz manifests or URLs")
    parser.add_argument("--base_url", default="https://data.commoncrawl.org/", help="base URL (or folder) for manifest paths")
    add_manifest_path_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any error was found")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> dict:
    files = expand_inputs(args.files, base=args.base_url, allow_any_manifest_path=args.allow_any_manifest_path)
    totals = {key: Counter() for key in TOTALS}
    per_file = []
    for path in tqdm(files, desc="inspect", unit="file", disable=args.quiet):
        summary = inspect_archive(path)
        per_file.append(summary.to_dict())
        for key in totals:
            totals[key].update(getattr(summary, key))
    report = {"files": len(files), **{k: dict(v.most_common()) for k, v in totals.items()}, "per_file": per_file}
    return {"report": report, "json": args.json, "strict": args.strict}


def format_summary(summary: dict) -> str:
    report = summary["report"]
    return json.dumps(report, indent=2, ensure_ascii=False) if summary["json"] else format_inspection(report)


def exit_status(summary: dict) -> int:
    return 1 if summary["strict"] and summary["report"]["errors"] else 0


def format_inspection(report: dict) -> str:
    lines = [f"{report['files']} file(s)"]
    for title, key in (("records by type", "records"), ("payload MIME types", "mime_types"), ("language headers", "languages"), ("errors by reason", "errors")):
        lines.append(f"\n{title}:")
        counts = report[key]
        if not counts:
            lines.append("  (none)")
        for name, count in counts.items():
            lines.append(f"  {name:48} {count:>10,}")
    errors = [e for f in report["per_file"] for e in f["first_errors"]]
    if errors:
        lines.append("\nfirst errors (file @ offset: reason):")
        lines.extend(f"  {e['source']} @{e['offset']}: {e['reason']} {e['detail']}"[:160] for e in errors[:20])
    return "\n".join(lines)
