"""`campaign reproduce` says "within tolerance" only when nothing but float values moved, and
by how much; any other difference is a different output."""

from __future__ import annotations

import pandas as pd
import torch
from safetensors.torch import save_file

from campaign.core.closeness import REPRODUCE_ATOL, max_abs_diff


def table(path, scores, labels=("a", "b")):
    frame = pd.DataFrame({"id": ["1", "2"], "prediction": list(labels), "score_a": scores})
    frame.to_parquet(path, index=False)
    return path


def test_tables_that_differ_only_in_scores_are_within_their_largest_difference(tmp_path):
    a = table(tmp_path / "a.parquet", [0.25, 0.5])
    b = table(tmp_path / "b.parquet", [0.25, 0.5 + 3e-7])
    assert abs(max_abs_diff(a, b) - 3e-7) < 1e-12
    assert max_abs_diff(a, b) <= REPRODUCE_ATOL
    assert max_abs_diff(a, a) == 0.0


def test_a_changed_prediction_or_row_count_is_different_not_close(tmp_path):
    a = table(tmp_path / "a.parquet", [0.25, 0.5])
    assert max_abs_diff(a, table(tmp_path / "b.parquet", [0.25, 0.5], ("a", "a"))) is None
    pd.DataFrame({"id": ["1"]}).to_parquet(tmp_path / "c.parquet")
    assert max_abs_diff(a, tmp_path / "c.parquet") is None


def test_model_folders_compare_their_tensors_and_need_the_same_files(tmp_path):
    for name, delta in (("x", 0.0), ("y", 2e-6)):
        (tmp_path / name).mkdir()
        save_file(
            {"w": torch.tensor([1.0, 2.0 + delta])}, str(tmp_path / name / "model.safetensors")
        )
        (tmp_path / name / "config.json").write_text("{}")
    diff = max_abs_diff(tmp_path / "x", tmp_path / "y")
    assert diff is not None and 1e-6 < diff < 3e-6
    (tmp_path / "y" / "config.json").write_text('{"other": 1}')
    assert max_abs_diff(tmp_path / "x", tmp_path / "y") is None  # not a table, not weights


def test_reproduce_names_each_output_bit_for_bit_within_tolerance_or_different():
    from campaign.cli import _reproduce_verdict

    row = {"output": "predictions_test", "equal": False, "max_abs_diff": 3e-7}
    assert _reproduce_verdict(row).startswith("within tolerance")
    assert "not bit for bit" in _reproduce_verdict(row)
    assert _reproduce_verdict({**row, "max_abs_diff": 0.2}).startswith("DIFFERENT")
    assert _reproduce_verdict({**row, "max_abs_diff": None}) == "DIFFERENT"
    assert _reproduce_verdict({**row, "equal": True}) == "same"
