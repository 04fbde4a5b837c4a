"""`campaign compare` on files lm-evaluation-harness and Inspect wrote for real (conftest.logs):
the evaluate stage's own statistics and decisions on them, items matched by document id, and
each refusal in one line naming the file, with no output left behind."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from campaign.cli import main
from campaign.compare.outputs import read_compare

# Real lm-evaluation-harness and Inspect logs, written once and kept between test sessions under
# pytest's temporary root, keyed by the kit's code and the tools' versions (logkit.build takes
# minutes on a loaded CPU). Here, not in a conftest.py: the suite's one conftest is tests/'s.
HERE = Path(__file__).parent


def _key() -> str:
    h = hashlib.sha256()
    for p in (HERE / "logkit.py", HERE.parent / "genkit.py"):
        h.update(p.read_bytes())
    for pkg in ("lm-eval", "inspect-ai", "transformers", "torch"):
        h.update(version(pkg).encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def logs(tmp_path_factory) -> dict:
    """logkit.build's folders: lm_eval/{a0,a1,b0,b1}, ppl/{a0,b0}, oneshot, inspect logs."""
    import logkit

    root = Path(tmp_path_factory.getbasetemp()).parent / f"compare-logs-{_key()}"
    if not (root / "DONE").is_file():
        work = Path(tmp_path_factory.mktemp("compare-logs"))
        logkit.build(work)
        (work / "DONE").write_text("")
        shutil.rmtree(root, ignore_errors=True)
        try:
            os.rename(work, root)
        except OSError:  # another session finished first: use its copy
            pass
    return logkit.layout(root)


def _compare(capsys, *args) -> tuple[int, str]:
    rc = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return rc, captured.err.strip()


def _samples(folder: Path, task: str) -> dict[str, float]:
    """{doc_id: acc or exact_match} of a samples file (read here independently of compare)."""
    path = next(folder.rglob(f"samples_{task}_*.jsonl"))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    metric = rows[0]["metrics"][0]
    return {str(r["doc_id"]): float(r[metric]) for r in rows}


def _runs(logs) -> list[str]:
    lm = logs["lm_eval"]
    return [f"a={lm['a0']}", f"a={lm['a1']}", f"b={lm['b0']}", f"b={lm['b1']}"]


def _refused(rc: int, err: str, out: Path, *named: str) -> None:
    assert rc == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    for text in named:
        assert text in err, (text, err)
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_lm_eval_logs_decided_by_the_stages_statistics_with_holm_across_tasks(
    logs, tmp_path, capsys
):
    from campaign.evaluate import holm
    from campaign.evaluate.comparison import contrast

    out = tmp_path / "out"
    rc, err = _compare(capsys, *_runs(logs), "--control", "a", "--out", out)
    assert rc == 0, err
    meta, scopes = read_compare(out / "decisions.json")
    assert set(scopes) == {"tiny_mc", "tiny_gen"} and meta["primary"] is None
    summary = (out / "summary.txt").read_text().splitlines()
    assert summary[0].startswith("No single verdict: 2 tasks")
    table = pd.read_parquet(out / "comparisons.parquet")
    main_rows = table[table["kind"] == "main"].set_index("scope")
    for task in ("tiny_mc", "tiny_gen"):
        lm = logs["lm_eval"]
        ids = sorted(_samples(lm["a0"], task))
        y = {m: np.array([[_samples(lm[f"{m}{i}"], task)[k] for k in ids] for i in (0, 1)])
             for m in ("a", "b")}  # fmt: skip
        e = contrast(y, {"b": 1.0, "a": -1.0})
        row = main_rows.loc[task]
        assert row["estimate"] == pytest.approx(y["b"].mean() - y["a"].mean())
        assert row["estimate"] == pytest.approx(e.estimate)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(e.interval(0.95, -1, 1))
        assert row["n_seeds"] == 2 and row["n_items"] == len(ids)
        decided = scopes[task].of_kind("main")[0]
        assert decided.decision == row["decision"] and decided.n_seeds == 2
    # Holm's family spans the tasks: the main effect's p is adjusted over both tasks' rows.
    p = main_rows.loc[["tiny_mc", "tiny_gen"], "p_value"].to_numpy()
    assert main_rows.loc[["tiny_mc", "tiny_gen"], "p_holm"].to_numpy() == pytest.approx(holm(p))


def test_pooled_decision_says_its_weighting_and_comes_first(logs, tmp_path, capsys):
    out = tmp_path / "out"
    rc, err = _compare(capsys, *_runs(logs), "--control", "a", "--pool", "items", "--out", out)
    assert rc == 0, err
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("Verdict (chosen on all tasks (items-weighted)")
    assert "weighs every item once: a task counts by its items (tiny_gen 30, tiny_mc 60)" in summary
    _, scopes = read_compare(out / "decisions.json")
    pooled = scopes["all tasks (items-weighted)"].of_kind("main")[0]
    mc, gen = (scopes[t].of_kind("main")[0].estimate for t in ("tiny_mc", "tiny_gen"))
    assert pooled.estimate == pytest.approx((60 * mc + 30 * gen) / 90)
    assert "## What would decide the open questions" in (out / "report.md").read_text()
    assert "<h2>Verdict</h2>" in (out / "report.html").read_text()


def test_items_are_matched_by_doc_id_not_by_line_order(logs, tmp_path, capsys):
    shuffled = tmp_path / "b1"
    shutil.copytree(logs["lm_eval"]["b1"], shuffled)
    for path in shuffled.rglob("samples_*.jsonl"):
        lines = path.read_text().splitlines()
        path.write_text("\n".join(reversed(lines)) + "\n")
    runs = _runs(logs)
    outs = []
    for i, last in enumerate((runs[3], f"b={shuffled}")):
        outs.append(tmp_path / f"out{i}")
        rc, err = _compare(capsys, *runs[:3], last, "--control", "a", "--out", outs[-1])
        assert rc == 0, err
    first, second = (pd.read_parquet(o / "comparisons.parquet") for o in outs)
    pd.testing.assert_frame_equal(first, second)


def test_items_missing_from_one_model_are_refused_naming_the_file_and_the_count(
    logs, tmp_path, capsys
):
    short = tmp_path / "b1"
    shutil.copytree(logs["lm_eval"]["b1"], short)
    path = next(short.rglob("samples_tiny_mc_*.jsonl"))
    path.write_text("\n".join(path.read_text().splitlines()[:-3]) + "\n")
    out = tmp_path / "out"
    rc, err = _compare(capsys, *_runs(logs)[:3], f"b={short}", "--control", "a", "--out", out)
    _refused(rc, err, out, str(path), "57 items", "3 of a@0's are missing", "drops none")


def test_a_metric_that_is_not_per_item_is_refused(logs, tmp_path, capsys):
    ppl, out = logs["ppl"], tmp_path / "out"
    args = (f"a={ppl['a0']}", f"b={ppl['b0']}", "--control", "a", "--out", out)
    rc, err = _compare(capsys, *args, "--metric", "word_perplexity")
    _refused(rc, err, out, "samples_tiny_ppl_", "not a per-item number", "perplexity")
    rc, err = _compare(capsys, *args)
    _refused(rc, err, out, "samples_tiny_ppl_", "word_perplexity, byte_perplexity; choose one")
    rc, err = _compare(capsys, *_runs(logs), "--control", "a", "--out", out, "--metric", "f1")
    _refused(rc, err, out, "samples_tiny_", "no per-item metric 'f1'")


def test_mixed_few_shot_settings_are_refused(logs, tmp_path, capsys):
    out = tmp_path / "out"
    one = logs["oneshot"]
    rc, err = _compare(capsys, f"a={logs['lm_eval']['a0']}", f"b={one}", "--control", "a",
                       "--out", out)  # fmt: skip
    _refused(rc, err, out, str(one), "few-shot setting 1 differs from 0")


def test_a_score_outside_0_1_is_refused_naming_the_file_and_the_item(tmp_path, capsys):
    table = tmp_path / "scores.csv"
    rows = [
        {"model": m, "task": "t", "item": f"i{k}", "score": 0.5} for m in "ab" for k in range(5)
    ]
    rows[7]["score"] = 1.5
    pd.DataFrame(rows).to_csv(table, index=False)
    out = tmp_path / "out"
    rc, err = _compare(capsys, table, "--control", "a", "--out", out)
    _refused(rc, err, out, str(table), "item 'i2'", "score 1.5", "not a number in [0, 1]")


def test_a_plain_table_of_the_same_scores_gives_the_same_decisions(logs, tmp_path, capsys):
    rows = []
    for m in ("a", "b"):
        for i in (0, 1):
            for task in ("tiny_mc", "tiny_gen"):
                for item, score in _samples(logs["lm_eval"][f"{m}{i}"], task).items():
                    metric = "acc" if task == "tiny_mc" else "exact_match"
                    rows.append({"model": m, "seed": i, "task": task, "item": item,
                                 "score": score, "metric": metric})  # fmt: skip
    table = tmp_path / "scores.parquet"
    frame = pd.DataFrame(rows)
    # the shared scored-items columns (the evaluate stage's names) read as well as `model`
    frame.rename(columns={"model": "cell"}).to_parquet(table)
    outs = [tmp_path / "lm", tmp_path / "plain"]
    for out, sources in zip(outs, (_runs(logs), [table]), strict=True):
        rc, err = _compare(capsys, *sources, "--control", "a", "--out", out)
        assert rc == 0, err
    lm, plain = (read_compare(o / "decisions.json")[1] for o in outs)
    for task in ("tiny_mc", "tiny_gen"):
        assert lm[task].decisions == plain[task].decisions


def test_inspect_logs_matched_by_sample_id_with_inspects_score_conversion(logs, tmp_path, capsys):
    from inspect_ai.log import read_eval_log_samples
    from inspect_ai.scorer import value_to_float

    a, b = logs["inspect"]["a0"], logs["inspect"]["b0"]
    out = tmp_path / "out"
    rc, err = _compare(capsys, f"a={a}", f"b={b}", "--variant", "b=a", "--margin", "0.05",
                       "--out", out)  # fmt: skip
    assert rc == 0, err
    to_float = value_to_float()
    score = {
        m: {str(s.id): to_float(s.scores["exact"].value) for s in read_eval_log_samples(str(p))}
        for m, p in (("a", a), ("b", b))
    }
    _, scopes = read_compare(out / "decisions.json")
    (variant,) = scopes["tiny_inspect"].of_kind("quantized")
    ids = sorted(score["a"])
    assert variant.subject == "b" and variant.reference == "a"
    expected = np.mean([score["b"][k] - score["a"][k] for k in ids])
    assert variant.estimate == pytest.approx(expected)
    assert math.isfinite(variant.ci_low) and variant.ci_low <= variant.estimate <= variant.ci_high


def test_fine_tunes_against_one_base_each_by_non_inferiority_holm_over_them(logs, tmp_path, capsys):
    lm, out = logs["lm_eval"], tmp_path / "out"
    rc, err = _compare(capsys, f"base={lm['a0']}", f"ft={lm['b0']}", f"ft={lm['b1']}",
                       "--variant", "ft=base", "--margin", "0.05", "--out", out)  # fmt: skip
    assert rc == 0, err
    table = pd.read_parquet(out / "comparisons.parquet")
    rows = table[(table["kind"] == "quantized") & (table["scope"] == "tiny_mc")]
    assert sorted(rows["subject"]) == ["ft@0", "ft@1"] and set(rows["reference"]) == {"base"}
    base = _samples(lm["a0"], "tiny_mc")
    for i in (0, 1):
        ft = _samples(lm[f"b{i}"], "tiny_mc")
        got = rows.set_index("subject").loc[f"ft@{i}", "estimate"]
        assert got == pytest.approx(np.mean([ft[k] - base[k] for k in base]))
    # Holm over the two fine-tunes and both tasks: at least the smallest p times four.
    smallest = table.loc[table["kind"] == "quantized", "p_value"].min()
    assert table.loc[table["kind"] == "quantized", "p_holm"].min() == pytest.approx(
        min(1.0, 4 * smallest)
    )


def test_help_says_what_compare_reads_and_refuses(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("lm-evaluation-harness output folder written with --log_samples",
                  "Inspect log", "model, task, item, score in [0, 1]", "--control NAME",
                  "--variant NAME=SOURCE", "items that do not match across models"):  # fmt: skip
        assert words in text


def test_a_variant_with_several_runs_says_how_they_pair_with_its_sources(logs, tmp_path, capsys):
    """Each run of a variant is tested against one run of its source: with lm-eval folders a
    run's seed is its position in the order given, so the summary says the pairing rule (a
    swapped order pairs a copy with another fine-tune)."""
    out = tmp_path / "out"
    rc, err = _compare(capsys, *_runs(logs), "--variant", "b=a", "--margin", "0.05",
                       "--out", out)  # fmt: skip
    assert rc == 0, err
    summary = (out / "summary.txt").read_text()
    assert "variant b: its runs are paired with a's by seed" in summary
    assert "position among the model's sources in the order given" in summary


def test_a_variant_given_in_another_order_than_its_source_is_doubted(tmp_path, capsys):
    """A quantized copy of each of two fine-tunes, its seeds swapped: paired by seed, each copy
    would be tested against the other fine-tune. The scores say which run each copy is of, so
    the summary's assumptions doubt the pairing, naming the file; in the right order no doubt.
    A doubt, not a refusal: a collapsed copy beside a diverged seed looks the same (below)."""
    rng = np.random.default_rng(5)
    runs = {s: (rng.random(200) < 0.7).astype(float) for s in (0, 1)}
    rows = [{"model": "a", "seed": s, "task": "t", "item": f"i{k}", "score": runs[s][k]}
            for s in (0, 1) for k in range(200)]  # fmt: skip
    copy = {s: runs[s].copy() for s in (0, 1)}
    for s in (0, 1):
        copy[s][:3] = 1 - copy[s][:3]  # a copy differs from its run on 3 of 200 items
    swapped = tmp_path / "swapped.csv"
    pd.DataFrame(
        rows
        + [
            {"model": "q", "seed": 1 - s, "task": "t", "item": f"i{k}", "score": copy[s][k]}
            for s in (0, 1)
            for k in range(200)
        ]  # fmt: skip
    ).to_csv(swapped, index=False)
    out = tmp_path / "out"
    rc, err = _compare(capsys, swapped, "--variant", "q=a", "--margin", "0.05", "--out", out)
    assert rc == 0, err
    said = (out / "summary.txt").read_text()
    assert f"{swapped}: variant run q@0 is paired by seed with a@0" in said.replace("\n", " ")
    assert "its scores are closest to a@1" in said.replace("\n", " ")
    right = tmp_path / "right.csv"
    pd.DataFrame(
        rows
        + [
            {"model": "q", "seed": s, "task": "t", "item": f"i{k}", "score": copy[s][k]}
            for s in (0, 1)
            for k in range(200)
        ]  # fmt: skip
    ).to_csv(right, index=False)
    rc, err = _compare(capsys, right, "--variant", "q=a", "--margin", "0.05", "--out", out)
    assert rc == 0, err
    assert "closest to" not in (out / "summary.txt").read_text()
    # A diverged seed (a@1 at 41 %) beside a copy of a@0 that collapsed to all wrong: paired
    # right, decided (the collapse is what the comparison is for), only doubted.
    weak = (rng.random(200) < 0.41).astype(float)
    collapsed = tmp_path / "collapsed.csv"
    scores = {("a", 0): runs[0], ("a", 1): weak, ("q", 0): np.zeros(200), ("q", 1): weak}
    pd.DataFrame(
        [{"model": m, "seed": s, "task": "t", "item": f"i{k}", "score": v[k]}
         for (m, s), v in scores.items() for k in range(200)]
    ).to_csv(collapsed, index=False)  # fmt: skip
    rc, err = _compare(capsys, collapsed, "--variant", "q=a", "--margin", "0.05", "--out", out)
    assert rc == 0, err
