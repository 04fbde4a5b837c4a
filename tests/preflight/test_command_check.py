"""The preflight's `command` check runs an outside trainer (train.commands) as a training job
would, on the overfit sample for a few steps: signalled mid-run, it must checkpoint and exit 75,
then resume from that checkpoint and finish with its model and a falling loss; its throughput
and peak memory are measured. A command that restarts from step 0 fails the check by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_preflight import cfg, run, spec
from trainkit import REPO, save_tiny_base, write_splits

from campaign.preflight.report import split_report
from campaign.train.contract import HOLD_ENV

EXAMPLE = "examples/hf_trainer_classification.py"

# Keeps every part of the contract but resume: started again, it trains from step 1.
NO_RESUME = """
import json, os, signal, sys
spec = json.load(open(os.environ["CAMPAIGN_RUN_SPEC"]))
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
for step in range(1, spec["max_steps"] + 1):
    import time; time.sleep(0.2)
    with open(spec["progress_file"], "a") as f:
        f.write(json.dumps({"step": step, "loss": 1.0 / step, "tokens": 8}) + "\\n")
    if stop:
        sys.exit(75)
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=160, n_eval=32)


def _with_commands(**commands) -> dict:
    run_spec = spec()
    run_spec["train"].update(command="builtin", commands=commands)
    return run_spec


def test_the_hf_trainer_example_keeps_the_contract_on_the_sample_and_is_measured(
    inputs, tmp_path, monkeypatch
):
    hf = {"argv": ["python", EXAMPLE], "files": [EXAMPLE], "packages": ["transformers"]}
    # The tiny model's steps take ~40 ms: on loaded cores the check's signal landed steps after
    # the one it was sent at. The helper's test hold waits at steps_before for it.
    config = cfg(resume={"steps_before": 2, "steps_after": 2})
    monkeypatch.setenv(HOLD_ENV, "2")
    result = run(inputs, tmp_path, _with_commands(hf=hf), ("command",), config)["command"]
    assert result["passed"], result["summary"]
    d, m = result["details"]["commands"]["hf"], result["details"]["runs"]["hf"]
    before = config["resume"]["steps_before"]
    # Signalled after steps_before steps, it stopped there and resumed from that checkpoint.
    assert d["signalled_at_step"] == before and m["resumed_from_step"] == m["stopped_at_step"]
    assert m["stopped_at_step"] == before + 1 < d["steps"]  # the step after the one held
    assert m["last_loss"] < m["first_loss"]
    assert m["steps_per_s"] > 0 and m["peak_rss_bytes"] > 50 * 2**20  # a torch process
    assert "hf: loss" in result["summary"] and "resumed from step" in result["summary"]
    # Where the signal landed and the rates vary between runs: measurements.json, not the
    # report `campaign reproduce` compares.
    report, measurements = split_report({"command": result, "passed": True})
    assert report["command"]["details"] == {"commands": {"hf": d}}
    assert measurements["command"]["details"]["runs"]["hf"] == m


def test_a_command_that_does_not_resume_fails_the_check_by_name(inputs, tmp_path):
    script = tmp_path / "no_resume.py"
    script.write_text(NO_RESUME)
    bad = {"argv": ["python", str(script)]}
    result = run(inputs, tmp_path, _with_commands(mine=bad), checks=("command",))["command"]
    assert not result["passed"]
    assert result["summary"] == (
        "mine: started again after its signal, it trained from step 0 (no resume)"
    )


def test_without_a_command_the_check_is_not_used(inputs, tmp_path):
    result = run(inputs, tmp_path, spec(), checks=("command",))["command"]
    assert result["passed"] and result["summary"].startswith("not used")


def test_a_classifier_adapter_without_its_head_fails_the_check_not_only_its_train_job(
    inputs, tmp_path, monkeypatch
):
    """The HF example under train.lora on a pretrained base, its LoraConfig without
    task_type="SEQ_CLS" (a user's slip): the adapter it saves holds no head, so the train job
    would refuse it; the preflight runs the same check on what the command wrote and fails."""
    script = tmp_path / "hf_headless.py"
    text = (REPO / EXAMPLE).read_text()
    assert '        task_type="SEQ_CLS",\n' in text
    script.write_text(text.replace('        task_type="SEQ_CLS",\n', ""))
    base, _ = save_tiny_base(tmp_path / "base", inputs)
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query", "value"]}
    run_spec = _with_commands(hf={"argv": ["python", str(script)]})
    run_spec["train"]["lora"] = lora
    run_spec["model"] = {"task": "sequence_classification", "source": str(base),
                         "tokenizer": {"source": "model"}}  # fmt: skip
    config = cfg(resume={"steps_before": 2, "steps_after": 2})
    monkeypatch.setenv(HOLD_ENV, "2")  # the signal goes in at step 2 (the helper's test hold)
    result = run({**inputs, "base_model": [base]}, tmp_path, run_spec, ("command",), config)
    check = result["command"]
    assert not check["passed"]
    summary = check["summary"]
    assert summary.startswith("hf: train.command: the peft adapter in "), summary
    assert "lacks the classification head's classifier (modules_to_save empty)" in summary
    assert 'set modules_to_save=["classifier"]' in summary and "\n" not in summary


def test_an_adapter_is_checked_against_the_runs_labels_not_the_samples(
    inputs, tmp_path, monkeypatch
):
    """The overfit sample's few examples lack some of the run's labels. A base saved with a head
    for all of them and a LoRA-only adapter: the train job takes it (the head is the base's);
    the preflight's command builds, and its adapter is checked against, the run's labels too,
    so it is not refused for a head for the sample's fewer labels."""
    import transformers as tf

    from campaign.preflight.bench import sample_data
    from campaign.train.loop import read_data
    from campaign.train.models import label_names

    config = cfg(resume={"steps_before": 2, "steps_after": 2})
    run_spec = _with_commands()
    data = read_data(inputs)
    sample = sample_data(data, config["sample"]["train_examples"],
                         config["sample"]["validation_examples"], run_spec["seed"])  # fmt: skip
    labels = label_names(data.train.labels)
    overfit = config["overfit"]["examples"]
    assert len(label_names(sample.train.labels[:overfit])) < len(labels)  # what is tested
    script = tmp_path / "hf_headless.py"
    script.write_text((REPO / EXAMPLE).read_text().replace('        task_type="SEQ_CLS",\n', ""))
    encoder, _ = save_tiny_base(tmp_path / "encoder", inputs)
    base = tmp_path / "base"  # a classifier's save: a head for the run's labels
    tf.AutoModelForSequenceClassification.from_pretrained(
        encoder, num_labels=len(labels)
    ).save_pretrained(base)
    tf.AutoTokenizer.from_pretrained(encoder).save_pretrained(base)
    run_spec["train"]["commands"] = {"hf": {"argv": ["python", str(script)]}}
    run_spec["train"]["lora"] = {"r": 4, "alpha": 8, "dropout": 0.0,
                                 "target_modules": ["query", "value"]}  # fmt: skip
    run_spec["model"] = {"task": "sequence_classification", "source": str(base),
                         "tokenizer": {"source": "model"}}  # fmt: skip
    monkeypatch.setenv(HOLD_ENV, "2")  # the signal goes in at step 2 (the helper's test hold)
    result = run({**inputs, "base_model": [base]}, tmp_path, run_spec, ("command",), config)
    assert result["command"]["passed"], result["command"]["summary"]


def test_a_command_that_exits_0_without_output_is_told_so_naming_the_paths(inputs, tmp_path):
    """Not "ran to its end through signal SIGUSR1": it never got the signal."""
    script = tmp_path / "nothing.py"
    script.write_text("import sys; sys.exit(0)\n")
    bad = {"argv": ["python", str(script)]}
    result = run(inputs, tmp_path, _with_commands(mine=bad), checks=("command",))["command"]
    assert not result["passed"]
    summary = result["summary"]
    assert "SIGUSR1" not in summary and "through signal" not in summary, summary
    assert summary.startswith("mine: exited 0 without writing its output"), summary
    # The paths it was to write, as its run spec names them.
    assert "command-mine/model" in summary and "progress.jsonl" in summary, summary


# Keeps the contract with the campaign's own model code (a checkpoint file per signal, resumed
# from), and writes 2 MiB beside its model folder and 1 MiB in its work folder.
WRITES_MORE = """
import json, os, signal, sys, time
from pathlib import Path
from campaign.train import models
spec = json.load(open(os.environ["CAMPAIGN_RUN_SPEC"]))
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
ckpt = Path(spec["checkpoint_dir"])
done = sorted(int(p.name.split("-")[1]) for p in ckpt.glob("checkpoint-*"))
start = done[-1] if done else 0
for step in range(start + 1, spec["max_steps"] + 1):
    time.sleep(0.2)
    with open(spec["progress_file"], "a") as f:
        f.write(json.dumps({"step": step, "loss": 1.0 / step, "tokens": 8}) + "\\n")
    if stop:
        (ckpt / f"checkpoint-{step}").write_bytes(b"c" * 1000)
        sys.exit(75)
tok = models.load_tokenizer(Path(spec["tokenizer"]), spec["task"])
model = models.build_model(spec["model"], tok, spec["labels"], spec["seed"], None)
model.save_pretrained(spec["output_dir"])
tok.save_pretrained(spec["output_dir"])
Path(spec["output_dir"]).parent.joinpath("big.bin").write_bytes(b"x" * 2 * 2**20)
Path(spec["progress_file"]).parent.joinpath("cache.bin").write_bytes(b"y" * 2**20)
"""


def test_the_check_measures_everything_a_command_writes_declared_or_not(inputs, tmp_path):
    script = tmp_path / "writes_more.py"
    script.write_text(WRITES_MORE)
    mine = {"argv": ["python", str(script)]}
    result = run(inputs, tmp_path, _with_commands(mine=mine), checks=("command",))["command"]
    assert result["passed"], result["summary"]
    disk = result["details"]["runs"]["mine"]["disk"]
    assert disk["undeclared"] == {"big.bin": 2 * 2**20, "work/cache.bin": 2**20}
    assert disk["checkpoint_bytes"] == 1000 and disk["model_bytes"] > 10_000
    assert "3.00 MiB it was not asked for (big.bin 2.00 MiB" in result["summary"]


def test_the_disk_check_says_its_size_is_a_built_in_runs_when_commands_train(inputs, tmp_path):
    """The disk check measures the built-in loop's run; a command's is the command check's."""
    mine = {"argv": ["python", "-c", "pass"]}
    result = run(inputs, tmp_path, _with_commands(mine=mine), checks=("disk",))["disk"]
    assert result["summary"].startswith("a built-in run writes "), result["summary"]
