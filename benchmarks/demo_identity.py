"""The demo's outputs before and after a change, compared file by file.

    git archive OLD_COMMIT | tar -x -C /tmp/old
    (cd /tmp/old && PYTHONPATH=$PWD corpusforge demo --out /tmp/demo-out) && mv /tmp/demo-out /tmp/demo-before
    corpusforge demo --out /tmp/demo-out
    python benchmarks/demo_identity.py /tmp/demo-before /tmp/demo-out --before_as /tmp/demo-out

Both runs write to the same folder, so that the absolute paths the outputs hold (a
document's source file, a plot's title) are the same; ``--before_as`` names the folder the
moved run wrote to, so that its paths are read as the other side's.

Every file of both folders gets one line:

    identical             the same bytes (under the same path, or under the path the
                          dataset layout moved it to, "was ..." says the old one)
    same but volatile     the same content apart from what a run cannot repeat: the time a
                          job finished, durations and throughputs, a gzip header's mtime,
                          the output folder's absolute path (each such field is named)
    no longer written     an empty shard file of the old layout (a shard index no document
                          falls in is not written any more, docs/formats.md)
    only before / after   a file one side has and the other has not
    differs               anything else, with the first field, line or byte that differs

The dataset layout (docs/formats.md) moved files without changing them: a job writing
several formats puts each in a folder named after it (``c4json/``, ``parquet/``,
``jsonl/``), and bookkeeping files start with ``_`` (``stats.json`` -> ``_stats.json``,
``errors/`` -> ``_errors/``, ``removed.jsonl`` -> ``_removed.jsonl``); paths are compared
in that new layout, and the ``_SUCCESS`` manifests and ``_stats.json`` files by their
entries, each path in them read in the new layout too.

Exit status 1 when some file differs or is on one side only, 0 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib.image  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

from common.storage import SUCCESS_FILE  # noqa: E402
from corpus.shards import FORMATS  # noqa: E402
from model.checkpoint import CHECKSUM_SUFFIX  # noqa: E402
from pipelines.audit.job import REMOVED_FILE  # noqa: E402
from pipelines.jobs import STATS_FILE  # noqa: E402
from pipelines.steps import ERRORS_FILE  # noqa: E402

# The names the bookkeeping files had before the dataset layout (their new names are imported).
OLD_NAMES = {"stats.json": STATS_FILE, "removed.jsonl": REMOVED_FILE}
OLD_ERRORS_DIR = "errors"
ERRORS_DIR = ERRORS_FILE.split("/")[0]
SHARD_NAME = re.compile(r"-\d{5}-of-\d{5}\.|\.\d{5}-of-\d{5}\.")

# JSON keys whose values a run cannot repeat: clock times, durations, speeds.
VOLATILE_KEY = re.compile(r"(^|_)(finished|started|created|elapsed|seconds|time|wall|duration|dt|ms|s|sec|"
                          r"per_s|per_sec|speed|throughput|mfu)$")
# A corpus fingerprint (``dedup.partitioned.corpus_fingerprint``) hashes the corpus' _SUCCESS
# manifests, which hold the time their job finished: it changes with every run.
FINGERPRINT_KEY = "corpus"
# A manifest's size and digest of a file whose content differs only in volatile fields.
VOLATILE_FILE = "<a file that differs only in volatile fields>"
# In text files: an ISO date-time, and "12.3 s" style durations.
VOLATILE_TEXT = [re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+\d\d:\d\d|Z)?"),
                 re.compile(r"\b\d+(\.\d+)? ?(s|ms|seconds)\b")]


def new_layout(rel: str) -> str:
    """``rel`` (a path inside the demo's output) in the dataset layout: format folders
    dropped, bookkeeping names with their ``_``."""
    parts = rel.split("/")
    parts = [p for i, p in enumerate(parts) if not (p in FORMATS and i < len(parts) - 1)]
    parts = [ERRORS_DIR if p == OLD_ERRORS_DIR and i < len(parts) - 1 else p for i, p in enumerate(parts)]
    parts[-1] = OLD_NAMES.get(parts[-1], parts[-1])
    return "/".join(parts)


def files_under(root: Path) -> dict[str, str]:
    """Every file under ``root``: its path in the new layout -> its path as written."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            rel = path.relative_to(root).as_posix()
            out[new_layout(rel)] = rel
    return out


def is_empty_shard(path: Path) -> bool:
    name = path.name
    if not SHARD_NAME.search(name):
        return False
    if name.endswith(".parquet"):
        return pq.ParquetFile(path).metadata.num_rows == 0
    data = path.read_bytes()
    return not (gzip.decompress(data) if name.endswith(".gz") else data).strip()


class Roots:
    """The two output folders, so that an absolute path in a file reads the same on both sides."""

    def __init__(self, before: Path, after: Path, before_as: Path | None = None, after_as: Path | None = None):
        def names(folder, written_as):
            found = {str(folder), str(folder.resolve())} | ({str(written_as)} if written_as else set())
            return sorted(found, key=len, reverse=True)

        self.names = {"before": names(before, before_as), "after": names(after, after_as)}

    def text(self, side: str, text: str) -> str:
        for name in self.names[side]:
            text = text.replace(name, "<OUT>")
        return text


def normalize_json(value, side: str, roots: Roots, empty: set[str], volatile: set[str]):
    """Paths in the new layout and the output root as ``<OUT>``; a ``files`` list of a
    ``_SUCCESS`` manifest as a name -> entry map without ``empty`` (the old layout's empty
    shards), the size and digest of a file in ``volatile`` (one whose content differs only
    in volatile fields) as ``VOLATILE_FILE``; both sets named from the manifest's folder."""
    if isinstance(value, dict):
        if isinstance(value.get("files"), list) and all(isinstance(f, dict) and "name" in f for f in value["files"]):
            value = dict(value)
            value["files"] = {new_layout(f["name"]): {k: VOLATILE_FILE if new_layout(f["name"]) in volatile and k in (
                "bytes", "sha256") else v for k, v in f.items() if k != "name"}
                for f in value["files"] if new_layout(f["name"]) not in empty}
        return {k: normalize_json(v, side, roots, empty, volatile) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize_json(v, side, roots, empty, volatile) for v in value]
    if isinstance(value, str):
        text = roots.text(side, value)
        if "/" in text or text in OLD_NAMES:
            text = re.sub(r"[\w./<>-]+", lambda m: new_layout(m.group(0)), text)
        return text
    return value


def json_diff(a, b, where: str, volatile: list[str]) -> str | None:
    """The first field where ``a`` and ``b`` differ (None when none does); fields whose key
    looks like a clock time or a speed are appended to ``volatile`` instead."""
    key = where.rsplit(".", 1)[-1]
    if a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
        return None
    if VOLATILE_KEY.search(key) and not isinstance(a, (dict, list)):
        volatile.append(where)
        return None
    if key == FINGERPRINT_KEY and all(isinstance(x, str) and x.startswith("sha256:") for x in (a, b)):
        volatile.append(f"{where} (fingerprint of the manifests)")
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                if VOLATILE_KEY.search(str(k)):
                    volatile.append(f"{where}.{k}")
                    continue
                return f"{where}.{k}: only {'after' if k not in a else 'before'}"
            found = json_diff(a[k], b[k], f"{where}.{k}", volatile)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items before, {len(b)} after"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = json_diff(x, y, f"{where}[{i}]", volatile)
            if found:
                return found
        return None
    return f"{where}: {str(a)[:60]!r} before, {str(b)[:60]!r} after"


def parse_json(name: str, data: bytes):
    text = data.decode("utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def compare_content(name: str, a: bytes, b: bytes, roots: Roots, empty: set[str],
                    volatile_files: set[str] = frozenset()) -> tuple[str, str]:
    """(status, detail) for two files of the same name whose bytes differ; ``empty`` and
    ``volatile_files``: paths (in the new layout) of the old layout's empty shards and of
    the files already found to differ only in volatile fields."""
    if name.endswith(".gz"):
        inner_a, inner_b = gzip.decompress(a), gzip.decompress(b)
        if inner_a == inner_b:
            return "same but volatile", "gzip header"
        status, detail = compare_content(name[:-3], inner_a, inner_b, roots, empty, volatile_files)
        return status, f"inside the gzip stream: {detail}"
    folder, _, base = name.rpartition("/")
    if base.endswith((".json", ".jsonl")) or base == SUCCESS_FILE:
        def here(keys):
            return {key[len(folder) + 1:] if folder else key for key in keys if not folder or key.startswith(folder + "/")}

        try:
            ja = normalize_json(parse_json(base, a), "before", roots, here(empty), here(volatile_files))
            jb = normalize_json(parse_json(base, b), "after", roots, here(empty), here(volatile_files))
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
        else:
            volatile: list[str] = []
            found = json_diff(ja, jb, "$", volatile)
            if found:
                return "differs", found
            if not volatile and roots.text("before", a.decode()) == roots.text("after", b.decode()):
                return "same but volatile", "the output folder's path"
            fields = sorted({re.sub(r"\[\d+\]", "[]", v) for v in volatile})
            if VOLATILE_FILE in json.dumps(ja):
                fields.append("sizes and digests of files that differ only in volatile fields")
            return "same but volatile", ", ".join(fields)[:200] or "paths in the new layout"
    if base.endswith(".parquet"):
        ta, tb = pq.read_table(io.BytesIO(a)), pq.read_table(io.BytesIO(b))
        if not ta.schema.equals(tb.schema, check_metadata=True):
            return "differs", f"parquet schema: {ta.schema} before, {tb.schema} after"
        if ta.equals(tb):
            return "same but volatile", "the same table and schema, other file bytes"
        volatile = []
        found = json_diff(normalize_json(ta.to_pylist(), "before", roots, set(), set()),
                          normalize_json(tb.to_pylist(), "after", roots, set(), set()), "$", volatile)
        return ("differs", f"parquet rows: {found}") if found else ("same but volatile", "the output folder's path")
    if base.endswith(".png"):
        pa, pb = matplotlib.image.imread(io.BytesIO(a)), matplotlib.image.imread(io.BytesIO(b))
        if pa.shape == pb.shape and np.array_equal(pa, pb):
            return "same but volatile", "the same pixels, other PNG metadata"
        return "differs", f"pixels ({pa.shape} before, {pb.shape} after)"
    if base.endswith(".pt"):
        sa, sb = (torch.load(io.BytesIO(x), map_location="cpu", weights_only=True) for x in (a, b))
        found = tensor_diff(normalize_json(sa, "before", roots, set(), set()),
                            normalize_json(sb, "after", roots, set(), set()), "$")
        return ("differs", found) if found else ("same but volatile", "the same tensors, the same values apart from paths")
    if base.endswith(CHECKSUM_SUFFIX) and name[:-len(CHECKSUM_SUFFIX)] in volatile_files:
        return "same but volatile", "the digest of a file that differs only in volatile fields"
    try:
        ta, tb = a.decode("utf-8"), b.decode("utf-8")
    except UnicodeDecodeError:
        offset = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y) if len(a) == len(b) else min(len(a), len(b))
        return "differs", f"bytes from offset {offset} ({len(a)} before, {len(b)} after)"
    ta, tb = roots.text("before", ta), roots.text("after", tb)
    if ta == tb:
        return "same but volatile", "the output folder's path"
    for pattern in VOLATILE_TEXT:
        ta, tb = pattern.sub("<T>", ta), pattern.sub("<T>", tb)
    if ta == tb:
        return "same but volatile", "date-times and durations in the text"
    la, lb = ta.splitlines(), tb.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(la, lb, strict=True)) if x != y), min(len(la), len(lb)))
    return "differs", f"line {line + 1}: {(la[line] if line < len(la) else '')[:70]!r}"


def tensor_diff(a, b, where: str) -> str | None:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
            return f"{where}: shapes"
        return None if torch.equal(a, b) else f"{where}: max |diff| {(a.double() - b.double()).abs().max().item():.3g}"
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{where}.{k}: one side only"
            found = tensor_diff(a[k], b[k], f"{where}.{k}")
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return next((f for f in (tensor_diff(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))) if f), None)
    volatile: list[str] = []
    return json_diff(a, b, where, volatile)


def compare(before: Path, after: Path, before_as: Path | None = None,
            after_as: Path | None = None) -> list[tuple[str, str, str]]:
    """One (status, path, detail) per file of either side, in path order; ``before_as`` /
    ``after_as``: the folder a run wrote to, when its output was moved since."""
    roots = Roots(before, after, before_as, after_as)
    old, new = files_under(before), files_under(after)
    empty = {key for key, rel in old.items() if key not in new and is_empty_shard(before / rel)}
    rows, volatile_files = [], set()
    # Manifests last: they list the other files' sizes and digests.
    for key in sorted(set(old) | set(new), key=lambda k: (k.rsplit("/", 1)[-1] == SUCCESS_FILE, k)):
        if key in empty:
            rows.append(("no longer written", old[key], "an empty shard"))
        elif key not in new:
            rows.append(("only before", old[key], ""))
        elif key not in old:
            rows.append(("only after", new[key], ""))
        else:
            a, b = (before / old[key]).read_bytes(), (after / new[key]).read_bytes()
            moved = f"was {old[key]}" if old[key] != new[key] else ""
            if a == b:
                rows.append(("identical", new[key], moved))
            else:
                status, detail = compare_content(key, a, b, roots, empty, volatile_files)
                if status == "same but volatile":
                    volatile_files.add(key)
                rows.append((status, new[key], "; ".join(x for x in (moved, detail) if x)))
    return sorted(rows, key=lambda row: new_layout(row[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="the demo's output folder before the change")
    parser.add_argument("after", type=Path, help="the demo's output folder after the change")
    parser.add_argument("--before_as", type=Path, help="the folder the before run wrote to, if BEFORE was moved since")
    parser.add_argument("--after_as", type=Path, help="the folder the after run wrote to, if AFTER was moved since")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not folder.is_dir():
            print(f"demo_identity: {folder}: not a folder", file=sys.stderr)
            return 2
    rows = compare(args.before, args.after, args.before_as, args.after_as)
    width = max(len(status) for status, _, _ in rows)
    for status, path, detail in rows:
        print(f"{status:<{width}}  {path}" + (f"  ({detail})" if detail else ""))
    counts: dict[str, int] = {}
    for status, _, _ in rows:
        counts[status] = counts.get(status, 0) + 1
    print(f"\n{len(rows)} files: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    return 1 if {"differs", "only before", "only after"} & set(counts) else 0


if __name__ == "__main__":
    sys.exit(main())
