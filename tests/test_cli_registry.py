"""The one job contract (docs/architecture.md): every command in ``pipelines.cli.COMMANDS`` is a
module with ``add_arguments``, ``run`` and ``format_summary``; the command line prints the summary,
and its one error funnel makes an input error one line (exit 2) and lets a bug keep its traceback."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import cli

REPO = Path(__file__).resolve().parents[1]
# The test command (tests/cli_commands.py), registered in the child process only.
REGISTER = "import sys; from pipelines import cli; cli.COMMANDS['hello'] = ('tests.cli_commands', 'a test command'); "


def in_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)


def hello(*argv: str) -> subprocess.CompletedProcess:
    return in_child(REGISTER + f"sys.exit(cli.main({['hello', *argv]!r}))")


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_registered_command_keeps_the_contract(name):
    module = cli.load_command(name)
    assert [f for f in cli.CONTRACT if not callable(getattr(module, f, None))] == []
    assert getattr(module, "EXTRA_OPTIONS", None) in (None, "beam", "store")
    parser = cli.command_parser(name, module)
    assert parser.prog == f"corpusforge {name}"
    assert any(action.option_strings for action in parser._actions if not isinstance(action, argparse._HelpAction))
    options = cli.load_options(name)  # where the command line parses it: the same options either way
    assert options.add_arguments is module.add_arguments
    assert getattr(options, "EXTRA_OPTIONS", None) == getattr(module, "EXTRA_OPTIONS", None)


@pytest.mark.pipeline
def test_help_lists_every_registered_command_and_imports_neither_torch_nor_beam():
    done = in_child("import sys\nfrom pipelines import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit as stop:\n"
                    "    print('exit', stop.code, *sorted(m for m in ('torch', 'apache_beam') if m in sys.modules))")
    listed = re.findall(r"^    ([\w-]+) ", done.stdout.split("COMMAND")[-1], re.M)
    assert listed == list(cli.COMMANDS)
    assert done.stdout.splitlines()[-1] == "exit 0"


# An option each command takes with a value, given without one: a usage error argparse finds.
VALUE_OPTION = {"demo": "--out", "sample": "--model"}


@pytest.mark.pipeline
def test_help_and_usage_errors_come_before_beam_or_torch_is_imported():
    beam_jobs = [name for name in cli.COMMANDS if name not in cli.NO_BEAM]
    assert sorted(beam_jobs) == ["audit", "c4", "decontaminate", "demo", "read", "tokenize", "webtext"]
    names = sorted(set(beam_jobs) | set(cli.OPTIONS_MODULES))  # decontaminate: its own module imports its job lazily
    assert "sample" in names
    code = ("import sys\nfrom pipelines import cli\nfor argv in %r:\n    try:\n        cli.main(argv)\n"
            "    except SystemExit as stop:\n        print(argv[0], argv[1:], 'exit', stop.code)\n"
            "print(*sorted(m for m in ('apache_beam', 'torch') if m in sys.modules) or ['neither'])"
            % [[name, *flags] for name in names for flags in (["--help"], ["--overwrite", VALUE_OPTION.get(name, "--output")])])
    done = in_child(code)
    lines = done.stdout.splitlines()
    assert lines[-1] == "neither", done.stderr[-2000:]
    assert [line.rsplit(" exit ", 1)[1] for line in lines if " exit " in line] == ["0", "2"] * len(names)
    for name in names:
        assert f"corpusforge {name}: error: argument {VALUE_OPTION.get(name, '--output')}: expected one argument" in done.stderr


@pytest.mark.pipeline
def test_the_summary_is_printed_and_exit_status_decides_the_code():
    done = hello("--outcome", "ok", "--name", "there")
    assert (done.returncode, done.stdout) == (0, "hello there\n")
    failed = hello("--outcome", "failed")
    assert (failed.returncode, failed.stdout) == (1, "hello world\n")


@pytest.mark.pipeline
def test_an_input_error_is_one_line_and_exit_2():
    done = hello("--outcome", "input", "--name", "nowhere")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.rstrip().endswith("ERROR corpusforge: --name nowhere: no such thing")


@pytest.mark.pipeline
def test_a_usage_error_reads_like_argparse_and_exits_2():
    done = hello("--outcome", "usage")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith("usage: corpusforge hello")
    assert done.stderr.splitlines()[-1] == "corpusforge hello: error: --name needs --outcome ok"


@pytest.mark.pipeline
def test_a_bug_keeps_its_traceback_and_exits_1():
    done = hello("--outcome", "bug", "--name", "x")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.rstrip().endswith("ValueError: a library's own complaint about x")


@pytest.mark.pipeline
def test_a_real_commands_missing_input_is_one_line_and_exit_2(tmp_path):
    done = in_child(f"import sys; from pipelines import cli; sys.exit(cli.main(['stats', {str(tmp_path / 'nothing')!r}, '-q']))")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "no such shard file or directory" in done.stderr


def test_run_job_returns_the_summary_and_raises_errors():
    cli.COMMANDS.setdefault("hello", ("tests.cli_commands", "a test command"))
    try:
        assert cli.run_job("hello", ["--outcome", "ok", "--name", "job"]) == {"name": "job", "failed": False}
        with pytest.raises(ValueError, match="complaint"):
            cli.run_job("hello", ["--outcome", "bug"])
        with pytest.raises(SystemExit) as stop:
            cli.run_job("hello", ["--outcome", "usage"])
        assert stop.value.code == 2
    finally:
        del cli.COMMANDS["hello"]
