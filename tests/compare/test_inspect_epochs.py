"""Inspect logs of several epochs, written by inspect_ai itself (the hf provider, sampling at
temperature 1 on tiny from-config models): a sample's epochs are one item's repeated answers
from the same weights, averaged into its score, never seeds; models scored over different
epochs are refused in one line naming the log."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from campaign.cli import main
from campaign.compare.outputs import read_compare

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _inspect(model: Path, tasks: Path, epochs, logs: Path) -> Path:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import exact
    from inspect_ai.solver import generate

    rows = [json.loads(line) for line in (tasks / "gen.jsonl").read_text().splitlines()]
    samples = [Sample(input=r["question"], target=r["answer"], id=f"g{i}")
               for i, r in enumerate(rows)]  # fmt: skip
    task = Task(dataset=samples, solver=generate(), scorer=exact(), name="tiny_epochs")
    args = {"model_path": str(model), "device": "cpu", "use_chat_template": False}
    got = eval(task, model="hf/local", model_args=args | {"do_sample": True}, epochs=epochs,
               max_tokens=1, temperature=1.0, seed=7, log_dir=str(logs), display="none",
               log_format="eval")  # fmt: skip
    return Path(got[0].location)


@pytest.fixture(scope="module")
def epoch_logs(tmp_path_factory) -> dict[str, Path]:
    """Inspect logs: model a and model b over 2 epochs, b over 1, a over 2 reduced by max."""
    import logkit
    from inspect_ai import Epochs

    root = tmp_path_factory.mktemp("epochs")
    tasks = logkit.write_tasks(root / "tasks")
    a = logkit.save_model(root / "models" / "a", 0)
    b = logkit.save_model(root / "models" / "b", 2, sharpen=3.0)
    return {
        "a2": _inspect(a, tasks, 2, root / "a2"),
        "b2": _inspect(b, tasks, 2, root / "b2"),
        "b1": _inspect(b, tasks, 1, root / "b1"),
        "a2max": _inspect(a, tasks, Epochs(2, "max"), root / "a2max"),
    }


def _item_means(log: Path) -> dict[str, float]:
    """{sample id: mean over its epochs of the exact scorer}, read here with Inspect's reader."""
    from inspect_ai.log import read_eval_log_samples
    from inspect_ai.scorer import value_to_float

    to_float, by_id = value_to_float(), defaultdict(list)
    for s in read_eval_log_samples(str(log)):
        by_id[str(s.id)].append(to_float(s.scores["exact"].value))
    assert {len(v) for v in by_id.values()} <= {1, 2}
    return {k: float(np.mean(v)) for k, v in by_id.items()}


def _compare(capsys, *args) -> tuple[int, str]:
    rc = main(["compare", *map(str, args)])
    return rc, capsys.readouterr().err.strip()


def test_epochs_are_one_items_repeated_answers_averaged_not_seeds(epoch_logs, tmp_path, capsys):
    a, b = epoch_logs["a2"], epoch_logs["b2"]
    out = tmp_path / "variant"
    rc, err = _compare(capsys, f"a={a}", f"b={b}", "--variant", "b=a", "--margin", "0.05",
                       "--out", out)  # fmt: skip
    assert rc == 0, err
    meta, scopes = read_compare(out / "decisions.json")
    # Each log is one run of its model: its epochs did not become seeds.
    assert [r["name"] for r in meta["runs"]] == ["a", "b"]
    mean = {m: _item_means(p) for m, p in (("a", a), ("b", b))}
    ids = sorted(mean["a"])
    (variant,) = scopes["tiny_epochs"].of_kind("quantized")
    assert variant.n_items == len(ids) == 30  # items, not items × epochs
    assert variant.estimate == pytest.approx(np.mean([mean["b"][k] - mean["a"][k] for k in ids]))
    assert any(line.startswith("tiny_epochs: 2 epochs per sample; a sample's score is the mean")
               for line in meta["assumed"])  # fmt: skip
    assert "2 epochs per sample" in (out / "summary.txt").read_text()
    # A recipe question needs seeds, which epochs are not: one run each, said so.
    out = tmp_path / "recipe"
    rc, err = _compare(capsys, f"a={a}", f"b={b}", "--control", "a", "--out", out)
    assert rc == 0, err
    (main_effect,) = read_compare(out / "decisions.json")[1]["tiny_epochs"].of_kind("main")
    assert main_effect.n_seeds == 1 and "one seed" in main_effect.decision


def test_models_scored_over_different_epochs_are_refused_naming_the_log(
    epoch_logs, tmp_path, capsys
):
    out = tmp_path / "out"
    a, b = epoch_logs["a2"], epoch_logs["b1"]
    rc, err = _compare(capsys, f"a={a}", f"b={b}", "--variant", "b=a", "--out", out)
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert f"{b}: task tiny_epochs: 1 epoch(s) per sample, {a} has 2" in err
    assert not out.exists()


def test_a_log_missing_one_sample_epoch_is_refused_naming_the_pair(epoch_logs, tmp_path, capsys):
    # b over the same samples and the same 2 epochs, its sample g3's second epoch left out (as
    # an interrupted run leaves it): not an epoch count that differs, one pair missing.
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(epoch_logs["b2"]))
    log.samples = [s for s in log.samples if (str(s.id), s.epoch) != ("g3", 2)]
    gap = tmp_path / "gap" / epoch_logs["b2"].name
    gap.parent.mkdir()
    write_eval_log(log, str(gap))
    a, out = epoch_logs["a2"], tmp_path / "out"
    rc, err = _compare(capsys, f"a={a}", f"b={gap}", "--variant", "b=a", "--out", out)
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert "epoch(s) per sample" not in err
    assert (
        f"{gap}: task tiny_epochs: 0 (sample, epoch) pairs are not in {a} and 1 of its are "
        "missing (e.g. sample 'g3' epoch 2)"
    ) in err
    assert not out.exists()


def test_a_log_reduced_otherwise_than_by_the_mean_is_named_in_the_assumptions(
    epoch_logs, tmp_path, capsys
):
    a, b, out = epoch_logs["a2max"], epoch_logs["b2"], tmp_path / "out"
    rc, err = _compare(capsys, f"a={a}", f"b={b}", "--variant", "b=a", "--out", out)
    assert rc == 0, err
    meta, scopes = read_compare(out / "decisions.json")
    (note,) = [line for line in meta["assumed"] if line.startswith("tiny_epochs: 2 epochs")]
    assert note.endswith(f"the logs' own reducer differs: {a.name} (max)")
    # The score is still the mean over the epochs, whatever the log's headline metric is.
    mean = {m: _item_means(p) for m, p in (("a", a), ("b", b))}
    (variant,) = scopes["tiny_epochs"].of_kind("quantized")
    assert variant.estimate == pytest.approx(
        np.mean([mean["b"][k] - mean["a"][k] for k in mean["a"]])
    )
