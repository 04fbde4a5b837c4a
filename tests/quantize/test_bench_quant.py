"""benchmarks/bench_quant.py decides with the evaluate phase's own functions and covers every
CPU variant of the registry; its short form runs end to end (so it cannot rot unseen)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_quant  # noqa: E402

EVALUATION = {
    "confidence": 0.95,
    "power": 0.8,
    "min_useful_effect": 0.01,
    "max_quality_loss": 0.01,
}


def test_every_cpu_variant_of_the_registry_torch_fp32_first():
    assert bench_quant.cpu_variants() == [
        "fp32",
        "bf16",
        "int8_dynamic",
        "int8_dynamic_activation",
        "int8_weight_only",
        "onnx_fp32",
        "onnx_int8_dynamic",
        "onnx_int8_static",
        "quanto_int4",
        "quanto_int8",
        "quanto_w8a8",
    ]


def test_decisions_and_goal_as_the_evaluate_phase_decides():
    # 1000 items, torch fp32 right on all: "same" changes none, "lossy" loses 17 (95 % score
    # interval's upper end -0.0106, but -0.0100 at the family's 97.5 %: not rejected).
    truth = np.zeros(1000, dtype=int)
    lossy = truth.copy()
    lossy[:17] = 1
    preds = {"fp32": truth, "same": truth.copy(), "lossy": lossy}
    rows = bench_quant.decide(truth, preds, EVALUATION)
    assert [rows[n]["decision"] for n in preds] == ["consistency check", "adopt", "inconclusive"]
    assert rows["lossy"]["estimate"] == pytest.approx(-0.017)
    line, met = bench_quant.goal_line(rows, {"fp32": 1.0, "same": 2.5, "lossy": 9.0})
    assert met and line.startswith("fastest non-inferior variant: same, 2.50x")
    line, met = bench_quant.goal_line(rows, {"fp32": 1.0, "same": 1.5, "lossy": 9.0})
    assert not met and line.endswith("MISSED")
    rows["same"]["decision"] = "inconclusive"
    line, met = bench_quant.goal_line(rows, {"fp32": 1.0, "same": 2.5, "lossy": 9.0})
    assert not met and line.startswith("goal: MISSED (no variant")


@pytest.mark.slow  # about 40 s of CPU (MiniLM: 2 steps, an int8 copy, one timing round)
def test_short_run_prints_the_table_and_the_goal(capsys):
    argv = "--train-steps 2 --eval 64 --variants int8_dynamic --rounds 1 --repeats 1 --batches 1"
    assert bench_quant.main(argv.split()) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {
        line.split()[0]: line for line in out if line.split()[:1] in (["fp32"], ["int8_dynamic"])
    }
    assert rows["fp32"].endswith("consistency check")
    assert "x" in rows["int8_dynamic"].split()[3]  # the speed-up against torch fp32
    # 64 items cannot show a one-point loss: the goal cannot be met on them.
    assert rows["int8_dynamic"].endswith("inconclusive (too few items)")
    assert out[-1].startswith("goal: MISSED")
