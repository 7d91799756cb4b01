"""Every `corpusforge` command quoted in README.md and docs/*.md names a real subcommand and
only options that subcommand's --help lists (or, for a Beam job, real Beam pipeline
options), so a renamed or removed option cannot leave the documentation behind."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.storage import STORE_OPTION_PREFIXES
from pipelines.options import unknown_beam_flags

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`(corpusforge [^`]+)`")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")
# Jobs whose unknown options are handed to Apache Beam as pipeline options.
BEAM_JOBS = {"read", "c4", "webtext", "audit", "decontaminate", "tokenize"}


def quoted_commands(text: str) -> list[str]:
    """`corpusforge ...` commands in fenced blocks (backslash continuations joined, comments
    dropped) and in inline code spans."""
    commands = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            if line.startswith("corpusforge "):
                commands.append(line)
    commands.extend(INLINE.findall(text))
    return commands


def all_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for command in quoted_commands(page.read_text(encoding="utf-8")):
            found.append((page.relative_to(REPO).as_posix(), command))
    return found


COMMANDS = all_commands()


def subcommand(command: str) -> str | None:
    """The subcommand a quoted command runs, past the global -v/-q; None for a placeholder."""
    words = [w for w in command.split()[1:] if w not in ("-v", "-q", "--verbose", "--quiet", "--debug")]
    if not words or not re.fullmatch(r"[a-z0-9]+", words[0]):
        return None
    return words[0]


# Prints {name: what `corpusforge [name] --help` prints} as JSON: one process runs every --help
# through the CLI's own entry, so the test process keeps its logging set-up.
HELP_SCRIPT = """
import contextlib, io, json, sys
from pipelines import cli
texts = {}
for name in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main([name, "--help"] if name != "-" else ["--help"])
        except SystemExit as stop:
            assert stop.code in (0, None), (name, stop.code)
    texts[name] = out.getvalue()
print(json.dumps(texts))
"""


@pytest.fixture(scope="module")
def help_texts() -> dict[str, str]:
    names = sorted({subcommand(command) for _, command in COMMANDS} - {None})
    done = subprocess.run([sys.executable, "-c", HELP_SCRIPT, "-", *names], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def is_beam_option(flag: str) -> bool:
    """Whether a registered Beam PipelineOptions class defines ``flag`` (given alone, a flag
    that takes a value makes Beam's parser stop with a usage error: it knows the flag)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return not unknown_beam_flags([flag])
    except SystemExit:
        return True


def test_the_pages_quote_commands_of_every_recipe():
    quoted = {subcommand(command) for _, command in COMMANDS}
    assert {"c4", "webtext", "audit", "decontaminate", "read", "inspect", "stats", "tokenize", "train", "sample", "finetune",
            "eval", "demo"} <= quoted


@pytest.mark.pipeline
def test_quoted_commands_name_real_subcommands_and_options(help_texts):
    listed = set(re.findall(r"^    (\w+)", help_texts["-"].split("COMMAND")[-1], re.M))
    problems = []
    for page, command in COMMANDS:
        name = subcommand(command)
        if name is None:
            continue
        if name not in listed:
            problems.append(f"{page}: {command!r}: no subcommand {name!r}")
            continue
        options = set(FLAG.findall(help_texts[name]))
        unknown = [flag for flag in FLAG.findall(command) if flag not in options]
        if name in BEAM_JOBS:
            unknown = [flag for flag in unknown if not is_beam_option(flag)]
        else:  # the other commands take the object stores' options (s3:// shards, runs, models)
            unknown = [flag for flag in unknown if not (flag.startswith(STORE_OPTION_PREFIXES) and (is_beam_option(flag) or flag.startswith("--store_timeout_s")))]
        if unknown:
            problems.append(f"{page}: {command!r}: {name} has no {', '.join(unknown)}")
    assert not problems, "\n".join(problems)


def test_beam_options_are_told_from_made_up_ones():
    assert is_beam_option("--direct_num_workers") and is_beam_option("--s3_disable_ssl") and is_beam_option("--runner")
    assert not is_beam_option("--varient")


@pytest.mark.parametrize("text, expected", [
    ("```sh\ncorpusforge c4 --input a \\\n    --output b  # a comment\n```\n", ["corpusforge c4 --input a      --output b"]),
    ("run `corpusforge stats docs/ --plot p.png` then", ["corpusforge stats docs/ --plot p.png"]),
    ("```\ntorchrun -m pipelines.cli train\n```\n", []),
])
def test_commands_are_found_in_blocks_and_inline_spans(text, expected):
    assert quoted_commands(text) == expected
