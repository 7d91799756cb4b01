"""JSON-lines files read one way: every non-blank line a JSON object, numbered from 1.

``json_objects(lines, where, error)`` yields ``(line number, object)``; a line that is not
JSON, or not an object, raises ``error`` (the caller's own input-error type) with one
message naming ``where`` and the line. The benchmark loaders (``dedup.benchmark_sets``)
and the fine-tuning task files (``model.finetune.task_files``) read their JSON lines through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator


def json_objects(lines: Iterable[str], where: str, error: type[Exception] = ValueError) -> Iterator[tuple[int, dict]]:
    """``(line number from 1, object)`` for every non-blank line of ``lines``."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{where}:{number}: not a JSON line ({exc.msg})") from None
        if not isinstance(row, dict):
            raise error(f"{where}:{number}: expected a JSON object, got {type(row).__name__}")
        yield number, row
