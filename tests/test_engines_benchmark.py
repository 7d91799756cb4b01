"""benchmarks/engines.py's summary over rounds: each engine's CPU and its ratio to the same round's baseline."""

from __future__ import annotations

from bench_scripts import load_benchmark


def test_the_rounds_summary_gives_each_engines_cpu_and_its_ratio_to_the_same_rounds_baseline(capsys):
    engines = load_benchmark("engines")
    base, spark = engines.BASELINE, "spark-local2"
    rounds = [{base: {"cpu": 30.0, "status": 0}, spark: {"cpu": 45.0, "status": 0}},
              {base: {"cpu": 40.0, "status": 0}, spark: {"cpu": 48.0, "status": 0}},
              {base: {"cpu": 35.0, "status": 0}, spark: {"cpu": 99.0, "status": 1}}]  # a failed run is left out
    engines.print_ranges(20000, rounds, [base, spark])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(" 20000 over 3 rounds")
    assert lines[1].split() == [base, "CPU", "s", "30.00", "/", "35.00", "/", "40.00", "CPU", "x", "1.00", "/", "1.00", "/", "1.00"]
    # the ratios are per round (1.50 and 1.20), not of the medians (46.5 / 35)
    assert lines[2].split() == [spark, "CPU", "s", "45.00", "/", "46.50", "/", "48.00", "CPU", "x", "1.20", "/", "1.35", "/", "1.50"]
