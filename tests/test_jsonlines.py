"""common.jsonlines: the one JSON-lines reader of the benchmark loaders and task files."""

from __future__ import annotations

import pytest

from common.errors import InputError
from common.jsonlines import json_objects


def test_objects_come_with_their_line_numbers_and_blank_lines_are_skipped():
    lines = ['{"a": 1}\n', "\n", "   \n", '{"b": [2, 3]}\n']
    assert list(json_objects(lines, "x.jsonl")) == [(1, {"a": 1}), (4, {"b": [2, 3]})]


@pytest.mark.parametrize("line, message", [('{"a": 1', r"x.jsonl:2: not a JSON line \("),
                                           ("[1, 2]", r"x.jsonl:2: expected a JSON object, got list"),
                                           ('"text"', r"x.jsonl:2: expected a JSON object, got str")])
def test_a_bad_line_is_the_callers_error_naming_the_file_and_line(line, message):
    with pytest.raises(InputError, match=message):
        list(json_objects(['{"ok": true}', line], "x.jsonl", InputError))
