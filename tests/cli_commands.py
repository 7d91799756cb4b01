"""A command that keeps the job contract (``pipelines.cli``) and fails as told, for
tests/test_cli_registry.py: the registry entry is added by the test, in its own process."""

from __future__ import annotations

import argparse

from common.errors import InputError, UsageError

OUTCOMES = ("ok", "failed", "input", "usage", "bug")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--outcome", choices=OUTCOMES, required=True, help="what run() does")
    parser.add_argument("--name", default="world", help="a value the summary repeats")


def run(args: argparse.Namespace) -> dict:
    if args.outcome == "input":
        raise InputError(f"--name {args.name}: no such thing")
    if args.outcome == "usage":
        raise UsageError("--name needs --outcome ok")
    if args.outcome == "bug":
        raise ValueError(f"a library's own complaint about {args.name}")
    return {"name": args.name, "failed": args.outcome == "failed"}


def format_summary(summary: dict) -> str:
    return f"hello {summary['name']}"


def exit_status(summary: dict) -> int:
    return 1 if summary["failed"] else 0
