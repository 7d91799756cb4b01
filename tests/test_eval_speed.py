"""benchmarks/eval_speed.py: the --task-shape option and the task specs of --generation (no model runs)."""

from __future__ import annotations

import argparse

import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def eval_speed():
    return load_benchmark("eval_speed")


def test_task_shape_parses_layers_width_and_heads(eval_speed):
    assert eval_speed.parse_shape("6x384") == (6, 384, 6)
    assert eval_speed.parse_shape("4X256x8") == (4, 256, 8)
    assert eval_speed.parse_shape("2x32") == (2, 32, 1)  # narrower than one 64-wide head
    for bad in ("6", "6x", "x384", "6x384x5", "0x384", "a x b", "1x2x3x4"):
        with pytest.raises(argparse.ArgumentTypeError):
            eval_speed.parse_shape(bad)


def test_task_shape_option_in_the_parser(eval_speed, monkeypatch):
    def stop(data):  # the options parsed: stop before the text is read and a model built
        raise SystemExit(0)

    monkeypatch.setattr(eval_speed, "load_text", stop)
    with pytest.raises(SystemExit) as exc:
        eval_speed.main(["--generation", "--task-shape", "6x384x12"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        eval_speed.main(["--generation", "--task-shape", "6x385"])
    assert exc.value.code == 2  # argparse's usage error, before any model is built


def test_task_specs_name_every_generative_task(eval_speed, real_data):
    from dedup.benchmark_sets import GENERATIVE_KINDS, load_benchmark

    lm = real_data / "lm_benchmarks"
    for part in ("cnn_dm", "wmt14_fren", "nq_open"):
        if not (lm / part).is_dir():
            pytest.skip(f"{lm / part} is missing: GPT-2's task files are not staged")
    names = []
    for spec in eval_speed.task_specs(real_data):
        bench = load_benchmark(spec)
        assert bench.meta["task"] in GENERATIVE_KINDS and bench.examples
        names.append(bench.name)
    assert names[0] == "coqa" and names[1:] == ["cnn_dm", "wmt14-fr-en", "wmt14-en-fr", "nq"]
