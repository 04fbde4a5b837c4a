"""The preflight phase: every check passes on a sound tiny recipe and fails on a recipe broken
in the way it exists to catch; check_report's one line; the stage writes its report, then fails."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest
import torch
from trainkit import REPO, preflight_config, tiny_spec, write_splits

from campaign import train
from campaign.core.errors import CampaignError
from campaign.core.runner import StageContext
from campaign.preflight import bench, checks
from campaign.preflight import report as preflight_report
from campaign.preflight.checks import memory as memory_check
from campaign.preflight.stage import stage as preflight_stage
from campaign.train import checkpoint
from campaign.train.batches import IGNORE

CPU = torch.device("cpu")
CHECKS = tuple(checks.load())  # every registered check, in report order
CFG = preflight_config(
    list(CHECKS),
    sample={"train_examples": 96, "validation_examples": 24},
    overfit={"examples": 4, "steps": 150, "max_final_loss": 0.1},
)
CAUSAL = {"task": "causal_lm", "architecture": "gpt2"}


def cfg(**changes) -> dict:
    out = copy.deepcopy(CFG)
    out.update(changes)
    return out


def spec(task: str = "sequence_classification", architecture: str = "bert", **train) -> dict:
    # lr 1e-2: a random-init tiny model learns 4 examples within the overfit budget.
    return tiny_spec(task=task, architecture=architecture, **{"lr": 1.0e-2, **train})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=160, n_eval=32)


def run(inputs, tmp_path, run_spec=None, checks=CHECKS, config=None, **hooks) -> dict:
    return preflight_report.run_preflight(
        run_spec if run_spec is not None else spec(),
        inputs,
        config if config is not None else cfg(),
        tmp_path / "work",
        REPO,
        only=checks,
        hooks=bench.Hooks(device=CPU, **hooks),
    )


def stage_context(run_spec: dict, inputs, folder: Path, config=None) -> StageContext:
    (folder / "out").mkdir(parents=True)
    return StageContext(
        "preflight",
        {"run": run_spec, "preflight": config or cfg()},
        inputs,
        {
            "report": folder / "out" / "report.json",
            "measurements": folder / "out" / "measurements.json",
            "report_text": folder / "out" / "report.txt",
        },
        folder / "work",
        REPO,
    )


# ------------------------------------------------------------------ sound recipes pass
@pytest.fixture(scope="module")
def classification(inputs, tmp_path_factory):
    """The whole preflight of a sound bert classifier, through the stage entry."""
    ctx = stage_context(spec(grad_accum=3), inputs, tmp_path_factory.mktemp("bert"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")  # the bitwise claims are CPU claims
        preflight_stage(ctx)
    return ctx, json.loads(ctx.outputs["report"].read_text())


def measured(ctx) -> dict:
    return json.loads(ctx.outputs["measurements"].read_text())


def test_sound_classifier_passes_every_check(classification):
    ctx, report = classification
    assert report["passed"] is True
    assert [n for n in CHECKS if not report[n]["passed"]] == []
    assert all(report[n]["blocking"] for n in CHECKS)
    summaries = {n: measured(ctx)[n]["summary"] for n in CHECKS}
    assert all(s and "\n" not in s for s in summaries.values())

    memory = report["memory"]["details"]
    for row in memory["comparison"]:
        if row["component"] in memory_check.EXACT_MEMORY:
            assert row["estimated"] == row["measured"] > 0, row
    assert memory["activation_relative_error"] <= CFG["activation_tolerance"]
    assert memory["fits"] == ["L4"] and memory["kv_cache"] is None

    grads = report["grad_accumulation"]["details"]
    assert grads["sizes"] == [1, 2, 3] and grads["target_counts"] == [1, 2, 3]
    assert grads["relative_difference"] < 1e-12 < 1e-6 < grads["shortcut_relative_difference"]

    resume = report["resume"]["details"]
    assert resume["differing_tensors"] == 0 and resume["missing"] == []
    assert resume["predictions_identical"] and resume["tokenizer_reloads_identically"]
    assert resume["max_score_difference"] == 0.0

    overfit = report["overfit"]["details"]
    assert overfit["final_loss"] <= 0.1 < overfit["initial_loss"]
    assert overfit["reached_at_step"] == len(overfit["losses"]) <= 150

    # Rates are machine measurements: in measurements.json, not in the compared report.
    t = measured(ctx)["throughput"]["details"]["rates"]
    assert "rates" not in report["throughput"]["details"]
    assert report["throughput"]["details"]["window_steps"] == 4
    assert t["samples_per_s"] > 0
    assert t["samples_per_s"] == pytest.approx(t["steps_per_s"] * 8 * 3)  # micro_batch x accum
    assert t["eval_seconds_per_example"] > 0 and t["checkpoint_save_seconds"] > 0

    disk = report["disk"]["details"]
    parts = ("checkpoint_bytes", "model_bytes", "prediction_bytes", "log_bytes")
    stored_twice = sum(disk[k] for k in parts if k != "checkpoint_bytes")
    assert disk["one_run_bytes"] == disk["checkpoint_bytes"] + 2 * stored_twice
    assert all(disk[k] > 0 for k in parts)
    assert "free_bytes" not in disk
    assert measured(ctx)["disk"]["details"]["free_bytes"] > disk["one_run_bytes"]

    text = ctx.outputs["report_text"].read_text()
    assert text.startswith("preflight: PASSED")
    assert all(f"  {n}" in text for n in CHECKS)
    assert "[[[CLS]]]" in text  # bert's label is read at [CLS]
    assert not (ctx.work_dir / "preflight").exists()  # scratch folders are cleaned up


def test_two_checks_at_a_time_write_the_same_report(classification, inputs, tmp_path):
    """The job's two cores (workers 2: a spawned second process) change no byte of the report,
    and the throughput check, which times the step, runs after the others have finished."""
    ctx, sequential = classification
    cheap = ("tokenization", "grad_accumulation", "throughput")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")
        report = preflight_report.run_preflight(
            spec(grad_accum=3), inputs, cfg(), tmp_path / "work", REPO, only=cheap, workers=2
        )
    stable, _ = preflight_report.split_report(report)
    assert list(report) == [*cheap, "passed"]
    for name in cheap:
        assert json.dumps(stable[name], sort_keys=True) == json.dumps(
            sequential[name], sort_keys=True
        ), name
    # Two at a time, the checks go longest first: the second process takes the first of them.
    first = min(cheap[:2], key=preflight_report.TWO_AT_A_TIME_ORDER.index)
    assert first == "grad_accumulation"
    assert report[first]["process"] == 2
    assert report["throughput"]["process"] == 1
    assert getattr(checks.load()["throughput"], "ALONE", False)
    assert not (tmp_path / "work" / "preflight").exists()  # both processes' scratch is gone


def test_sound_causal_lm_passes_and_masks_the_prompt(inputs, tmp_path):
    report = run(inputs, tmp_path, spec(**CAUSAL))
    assert report["passed"] and all(report[n]["passed"] for n in CHECKS)
    tok = report["tokenization"]["details"]
    assert tok["no_loss"] == tok["target_truncated"] == tok["mask_mismatch"] == 0
    for e in tok["inspected"]:
        n_loss = len(e["loss_positions"])
        # The response (" " + label + EOS) is the last n_loss tokens; all before it is masked.
        assert e["loss_positions"] == list(range(e["n_tokens"] - n_loss, e["n_tokens"]))
        assert e["loss_text"] == f" {e['label']}<|endoftext|>"
        assert e["masked_prompt_tokens"] == e["n_tokens"] - n_loss
    memory = report["memory"]["details"]
    assert memory["kv_cache"]["estimated"] == memory["kv_cache"]["measured"] > 0
    assert report["resume"]["details"]["generation_identical"] is True


# ------------------------------------------------------------------ broken recipes fail
def mask_every_label(examples: list[dict]) -> list[dict]:
    """A broken formatter: no position carries loss."""
    out = []
    for e in examples:
        if "labels" in e:
            out.append({**e, "labels": [IGNORE] * len(e["labels"])})
        else:
            out.append({**e, "label": IGNORE})
    return out


@pytest.mark.parametrize("task", ["sequence_classification", "causal_lm"])
def test_labels_masked_everywhere_fail_tokenization_and_overfit(inputs, tmp_path, task):
    s = spec(**CAUSAL) if task == "causal_lm" else spec()
    report = run(
        inputs,
        tmp_path,
        s,
        checks=("tokenization", "overfit"),
        transform_examples=mask_every_label,
    )
    assert report["passed"] is False
    assert not report["tokenization"]["passed"] and not report["overfit"]["passed"]
    assert "96 of 96 examples carry no loss" in report["tokenization"]["summary"]
    assert "all labels are masked" in report["overfit"]["summary"]


def test_loss_on_the_prompt_fails_tokenization(inputs, tmp_path):
    def supervise_everything(examples):  # a formatter that forgot to mask the prompt
        return [{**e, "labels": list(e["input_ids"])} for e in examples]

    report = run(
        inputs,
        tmp_path,
        spec(**CAUSAL),
        checks=("tokenization",),
        transform_examples=supervise_everything,
    )
    assert not report["tokenization"]["passed"]
    assert "not 'prompt masked, response carries loss'" in report["tokenization"]["summary"]


def test_truncated_response_fails_tokenization(inputs, tmp_path):
    def cut_the_eos(examples):  # a formatter that truncates after adding the response
        return [
            {**e, "input_ids": e["input_ids"][:-1], "labels": e["labels"][:-1]} for e in examples
        ]

    report = run(
        inputs, tmp_path, spec(**CAUSAL), checks=("tokenization",), transform_examples=cut_the_eos
    )
    assert report["tokenization"]["summary"] == "truncation cut the target of 96 examples"


def test_a_crashing_check_is_a_failed_check_with_its_traceback(inputs, tmp_path):
    def broken_disk_probe(path):
        raise OSError("statvfs failed")

    report = run(inputs, tmp_path, checks=("disk",), free_bytes=broken_disk_probe)
    check = report["disk"]
    assert check["summary"] == "could not run: OSError: statvfs failed"
    assert "broken_disk_probe" in check["details"]["traceback"]
    assert "broken_disk_probe" in preflight_report.format_report(report)


def test_unnormalized_accumulation_fails(inputs, tmp_path):
    broken = functools.partial(train.accumulated_gradients, normalize=False)
    report = run(
        inputs,
        tmp_path,
        spec(grad_accum=3),
        checks=("grad_accumulation",),
        accumulated_gradients=broken,
    )
    check = report["grad_accumulation"]
    assert not check["passed"] and "not normalized" in check["summary"]
    assert check["details"]["relative_difference"] > 1e-6


def test_diverging_learning_rate_fails_overfit(inputs, tmp_path):
    report = run(inputs, tmp_path, spec(lr=1.0), checks=("overfit",))
    check = report["overfit"]
    assert not check["passed"] and "lr 1" in check["summary"]
    d = check["details"]
    assert (
        d["reached_at_step"] is None
        and len(d["losses"]) == 150
        or "non-finite" in (check["summary"])
    )


def drop_optimizer(folder: Path, state: dict, keep: int) -> Path:
    return checkpoint.save_checkpoint(
        folder, {k: v for k, v in state.items() if k != "optimizer"}, keep
    )


def reset_optimizer(folder: Path, state: dict, keep: int) -> Path:
    """Subtler: the key is there, but it holds a fresh optimizer (no Adam moments)."""
    fresh = {"state": {}, "param_groups": state["optimizer"]["param_groups"]}
    return checkpoint.save_checkpoint(folder, {**state, "optimizer": fresh}, keep)


@pytest.mark.parametrize(
    ("saver", "message"),
    [(drop_optimizer, "lacks optimizer"), (reset_optimizer, "weight tensors differ")],
)
def test_checkpoint_without_optimizer_state_fails_resume(inputs, tmp_path, saver, message):
    report = run(inputs, tmp_path, checks=("resume",), save_checkpoint=saver)
    check = report["resume"]
    assert not check["passed"] and message in check["summary"], check["summary"]


def test_impossible_target_card_fails_memory(inputs, tmp_path):
    config = cfg(target_cards=[{"name": "toy", "memory_gib": 1.0e-4}])
    report = run(inputs, tmp_path, checks=("memory",), config=config)
    check = report["memory"]
    assert not check["passed"] and "fits none of toy" in check["summary"]
    # The estimate-vs-measurement part still held: only the fit failed.
    assert check["details"]["problems"] == [check["summary"]]


def test_tiny_disk_fails(inputs, tmp_path):
    report = run(inputs, tmp_path, checks=("disk",), free_bytes=lambda path: 10_000)
    check = report["disk"]
    assert not check["passed"] and check["summary"].endswith("does not fit with the margin")
    assert check["details"]["free_bytes"] == 10_000 < check["details"]["one_run_bytes"]


def test_unsupported_precision_fails_environment(inputs, tmp_path):
    report = run(inputs, tmp_path, spec(precision="fp16"), checks=("environment",))
    check = report["environment"]
    assert not check["passed"] and "fp16 needs a CUDA device" in check["summary"]
    assert check["details"]["report"]["torch"] == torch.__version__


def test_the_report_is_the_same_bytes_on_a_rerun_and_timings_are_set_apart(
    classification, inputs, tmp_path
):
    # What `campaign reproduce` compares: the verdicts and exact findings, never a timing.
    first_ctx, _ = classification
    ctx = stage_context(spec(grad_accum=3), inputs, tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")
        preflight_stage(ctx)
    assert ctx.outputs["report"].read_bytes() == first_ctx.outputs["report"].read_bytes()
    volatile = measured(ctx)
    assert set(volatile["memory"]["details"]) == {"measured", "lever_costs"}  # step times
    assert set(volatile["environment"]["details"]) == {"device", "report"}


# ------------------------------------------------------------------ the verdict
def _check(passed: bool, blocking: bool, summary: str) -> dict:
    return {"passed": passed, "blocking": blocking, "summary": summary, "details": {}}


def test_check_report_names_failed_blocking_checks_in_one_line():
    report = {
        "environment": _check(True, True, "fine"),
        "memory": _check(False, True, "fits none of toy"),
        "throughput": _check(False, False, "slow"),
        "disk": _check(False, True, "does not fit"),
    }
    assert preflight_report.failed_blocking(report) == ["memory", "disk"]
    with pytest.raises(CampaignError) as e:
        preflight_report.check_report(report)
    assert str(e.value) == (
        "preflight failed (2 blocking): memory: fits none of toy; disk: does not fit"
    )
    # A non-blocking failure alone does not raise.
    preflight_report.check_report({"throughput": _check(False, False, "slow")})
    text = preflight_report.format_report(report)
    assert text.splitlines()[0] == "preflight: FAILED (memory, disk)"
    assert "  fail  throughput" in text and "  FAIL  memory" in text


def test_non_blocking_failure_leaves_the_preflight_passed(inputs, tmp_path):
    config = cfg(blocking=[c for c in CHECKS if c != "disk"])
    report = run(inputs, tmp_path, checks=("disk",), config=config, free_bytes=lambda p: 0)
    assert report["disk"]["passed"] is False and report["disk"]["blocking"] is False
    assert report["passed"] is True
    preflight_report.check_report(report)


def test_stage_writes_both_outputs_then_fails(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    ctx = stage_context(spec(precision="fp16"), inputs, tmp_path)
    with pytest.raises(CampaignError) as e:
        preflight_stage(ctx)
    message = str(e.value)
    assert "\n" not in message and message.startswith("preflight failed")
    assert message.startswith(
        "preflight failed (8 blocking): environment: train.precision: fp16 needs a CUDA device"
    )
    assert message.endswith(
        "(so memory, tokenization, overfit, grad_accumulation, resume, throughput, disk could "
        "not run)"
    )
    report = json.loads(ctx.outputs["report"].read_text())
    assert report["passed"] is False and not report["environment"]["passed"]
    text = ctx.outputs["report_text"].read_text()
    assert text.startswith("preflight: FAILED (environment")
    assert text.strip() in capsys.readouterr().out  # printed, so the stage log keeps it


# ------------------------------------------------------------------ configuration and sample
def test_config_errors_name_the_key(inputs, tmp_path):
    bad = [
        ({k: v for k, v in CFG.items() if k != "disk_margin"}, r"^preflight.disk_margin: missing"),
        (cfg(extra=1), r"^preflight.extra: not a key"),
        (cfg(blocking=["memory", "speed"]), r"^preflight.blocking: \['speed'\]"),
        (cfg(overfit={"examples": 4, "steps": 0, "max_final_loss": 0.1}), "overfit.steps"),
        (cfg(memory_margin=1.5), r"^preflight.memory_margin: expected a number in \[0.0, 1.0\)"),
    ]
    for config, pattern in bad:
        with pytest.raises(CampaignError, match=pattern):
            run(inputs, tmp_path, config=config, checks=())


def test_sample_is_seeded(inputs):
    data = train.read_data(inputs)
    a = bench.sample_data(data, 20, 5, seed=1)
    b = bench.sample_data(data, 20, 5, seed=1)
    c = bench.sample_data(data, 20, 5, seed=2)
    assert a == b and a.train.ids != c.train.ids
    assert len(a.train) == 20 and len(a.validation) == 5 and len(a.test) == 0
    positions = [data.train.ids.index(i) for i in a.train.ids]
    assert positions == sorted(positions)  # file order kept


def test_evaluations_per_run_hand_computed():
    assert bench.evaluations_per_run(200, 50) == 4
    assert bench.evaluations_per_run(12, 5) == 3  # steps 5, 10 and the last, 12
