"""Serving one request, per option (prompt and generated tokens, measured speed, cost per
million requests), and the fine-tune's break-even against each prompted floor: the numbers
against a hand computation, "never", "immediately" and a zero difference."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from test_budget_stage import after_verdict, run_stage, write_inputs

from campaign.budget.serving import break_even
from campaign.core.errors import CampaignError


def test_the_break_even_is_the_extra_training_over_the_saving_per_request():
    # 1.00 more to train, 0.0003 saved a request: 3,333.3 requests, so 3,334 pay it back.
    assert break_even(1.0, 0.0005, 0.0002) == ("after", 3334.0)
    # The floor costs no more per request: a fine-tune that costs more to train never pays
    # back, a zero difference included (no division by zero, no infinite or negative count).
    assert break_even(1.0, 0.0002, 0.0005)[0] == "never"
    words, n = break_even(1.0, 0.0002, 0.0002)
    assert words == "never" and math.isnan(n)
    # Cheaper (or equal) to train and to serve: from the first request.
    assert break_even(0.0, 0.0002, 0.0002) == ("immediately", 0.0)
    assert break_even(-0.5, 0.0005, 0.0002) == ("immediately", 0.0)
    # Cheaper to train, dearer to serve: ahead until the floor's saving catches up.
    assert break_even(-1.0, 0.0002, 0.0012) == ("until", 1000.0)
    assert break_even(math.nan, 0.0002, 0.0001)[0] == "unknown"
    # The same training cost and a dearer request: never ahead, not "cheaper until 0 requests".
    words, n = break_even(0.0, 1e-7, 0.001)
    assert words == "never" and math.isnan(n)
    # 0.3 / (0.3 - 0.2) is 3 requests exactly: a float's last bit does not make it 4.
    assert break_even(0.3, 0.3, 0.2) == ("after", 3.0)
    assert break_even(-0.3, 0.2, 0.3) == ("until", 3.0)
    for extra in (-2.0, -1e-9, 0.0, 1e-9, 3.0):
        for floor in (0.0, 1e-7, 0.001):
            for tuned in (0.0, 1e-7, 0.001):
                _, n = break_even(extra, floor, tuned)
                assert math.isnan(n) or (n >= 0 and n == int(n)), (extra, floor, tuned, n)


FEW_SHOT_VS_CELL = {
    "keep": "train.lr=0.001",
    "kind": "cell",
    "against_floor": {"floor": "floor/few_shot", "decision": "above floor", "split": "validation",
                      "estimate": 0.05, "ci_low": 0.01, "ci_high": 0.09},
}  # fmt: skip


def prompted_floors(
    root, zero_shot_speed: float = 1000.0, few_shot_speed: float = 5.0, verdict=None
) -> dict:
    """write_inputs' campaign with the generation floors' timings and frames as the floor stage
    and the quantize phase write them: a few-shot floor (1.8 s to fit its nearest choice, 5
    requests/s; on test 300 prompt + 15 generated tokens a request) and a zero-shot one (50 +
    20 tokens: the runs' prompt); run-a's variants generated 12 (int8) and 16 (fp32) tokens a
    test item. `verdict`: the evaluation's (FEW_SHOT_VS_CELL unless given)."""
    inputs = write_inputs(root, verdict=verdict or FEW_SHOT_VS_CELL)

    def timed(fit, speed, prompt, new):
        split = {"items": 2, "seconds": 2 / speed, "prompt_tokens": prompt, "new_tokens": new}
        return {"fit_seconds": fit, "predict": {"test": split, "validation": split},
                "predict_items": 4, "predict_seconds": 4 / speed, "throughput": speed,
                "device": "cpu"}  # fmt: skip

    floors = {"floors": {"floor/few_shot": timed(1.8, few_shot_speed, 600, 30),
                         "floor/zero_shot": timed(0.0, zero_shot_speed, 100, 40)},
              "threads": 1}  # fmt: skip
    (root / "floor_timings.json").write_text(json.dumps(floors))
    metrics = pd.read_parquet(root / "metrics.parquet")
    more = pd.DataFrame(
        {"variant": ["floor/few_shot", "floor/zero_shot"], "split": ["test", "test"],
         "metric": ["accuracy"] * 2, "value": [0.80, 0.6], "ci_low": [0.75, 0.55],
         "ci_high": [0.85, 0.65]}
    )  # fmt: skip
    pd.concat([metrics, more]).to_parquet(root / "metrics.parquet")
    for variant, tokens in (("int8_dynamic", [10, 14]), ("fp32", [15, 17])):
        folder = root / "run-a" / variant
        folder.mkdir(parents=True)
        pd.DataFrame(
            {"id": ["t0", "t1"], "reference": ["a", "b"], "prediction": ["a", "c"],
             "new_tokens": tokens, "stopped_at_eos": [True, True]}
        ).to_parquet(folder / "predictions_test.parquet")  # fmt: skip
    return inputs


def test_each_option_is_priced_per_request_with_the_fine_tunes_break_even(tmp_path):
    out = run_stage(tmp_path, prompted_floors(tmp_path))
    rows = pd.read_parquet(out["serving_parquet"]).set_index("variant")
    assert list(rows.index) == ["run-a/int8_dynamic", "floor/few_shot", "floor/zero_shot"]
    # By hand, at the offer box's 2.00 EUR an hour: int8 serves 400 requests/s, 2 / 3600 / 400
    # = 1.39 EUR a million; the few-shot floor 5/s: 111.11 EUR a million. run-a cost 4.00 EUR
    # to train, the few-shot fit 1.8 s = 0.001 EUR: (4.00 - 0.001) / (2/3600/5 - 2/3600/400)
    # = 36,446.6 requests, so the fine-tune pays back after 36,447.
    tuned, few = rows.loc["run-a/int8_dynamic"], rows.loc["floor/few_shot"]
    assert tuned["cost_per_million_requests"] == pytest.approx(2 / 3600 / 400 * 1e6)
    assert few["cost_per_million_requests"] == pytest.approx(111.111111)
    assert (few["break_even"], few["break_even_requests"]) == ("after", 36447.0)
    assert few["against"] == "run-a/int8_dynamic" and few["verdict"] == "above floor"
    # Tokens a request on the quality split (test): the few-shot prompt holds its examples, the
    # fine-tune's prompt is the zero-shot one, its answers the int8 variant's own (12 tokens).
    assert (few["prompt_tokens"], few["generated_tokens"]) == (300.0, 15.0)
    assert (tuned["prompt_tokens"], tuned["generated_tokens"]) == (50.0, 12.0)
    assert tuned["generated_tokens_per_s"] == pytest.approx(400 * 12.0)
    assert (few["generated_tokens_per_s"], few["device"]) == (75.0, "cpu")
    # The zero-shot floor (1,000 requests/s) is not weighed by the evaluation: its quality is
    # not shown equal to the fine-tune's, so its costs stand without a break-even.
    zero = rows.loc["floor/zero_shot"]
    assert pd.isna(zero["break_even"]) and pd.isna(zero["break_even_requests"])
    assert zero["verdict"] == "not weighed" and tuned["verdict"] == "kept"
    # The equal-quality table carries the same per-request figures, a column each.
    eq = pd.read_csv(out["equal_quality_csv"]).set_index("variant")
    assert eq.loc["run-a", "generated_tokens"] == 16.0
    assert eq.loc["run-a", "cost_per_million_requests"] == pytest.approx(2 / 3600 / 100 * 1e6)
    lines = after_verdict(out["summary"].read_text()).splitlines()
    assert (
        "  floor/few_shot: 300.0 prompt + 15.0 generated tokens; 5 requests/s, 75 generated "
        "tokens/s on cpu; 111.11 EUR per million requests; test accuracy 80.0 % [75.0, 85.0]."
    ) in lines
    assert (
        "  Against floor/few_shot: the kept cell train.lr=0.001: above floor (+5.0 points "
        "[+1.0, +9.0] on validation); the fine-tune run-a/int8_dynamic pays back after 36,447 "
        "requests."
    ) in lines
    assert (
        "  Against floor/zero_shot: not weighed against the kept cell (the evaluation weighs "
        "the best floor); cost only: 1.39 EUR per million requests for the fine-tune "
        "run-a/int8_dynamic, 0.56 EUR per million requests for this floor (no break-even: the "
        "evaluation has not weighed their quality)."
    ) in lines
    assert "match" not in out["summary"].read_text()
    assert "never pays back" not in out["summary"].read_text()


def test_a_floor_as_cheap_per_request_as_the_fine_tune_never_divides_by_zero(tmp_path):
    # The few-shot floor at int8's 400 requests/s: the same cost a request, no saving.
    out = run_stage(tmp_path, prompted_floors(tmp_path, few_shot_speed=400.0))
    few = pd.read_parquet(out["serving_parquet"]).set_index("variant").loc["floor/few_shot"]
    assert few["break_even"] == "never" and pd.isna(few["break_even_requests"])
    assert "never pays back" in out["summary"].read_text()


def floor_kept(decision: str, estimate: float, low: float, high: float) -> dict:
    """The verdict keeps the few-shot floor; the best cell against it: `decision`."""
    against = {"floor": "floor/few_shot", "decision": decision, "split": "validation",
               "estimate": estimate, "ci_low": low, "ci_high": high}  # fmt: skip
    return {"keep": "floor/few_shot", "kind": "floor", "against_floor": against}


def test_against_a_floor_above_the_cell_the_costs_stand_without_a_break_even(tmp_path):
    verdict = floor_kept("below floor", -0.10, -0.14, -0.06)
    out = run_stage(tmp_path, prompted_floors(tmp_path, verdict=verdict))
    rows = pd.read_parquet(out["serving_parquet"]).set_index("variant")
    few, tuned = rows.loc["floor/few_shot"], rows.loc["run-a/int8_dynamic"]
    # The floor is 10 points above the cell: no count of requests makes a worse model pay back.
    assert few["verdict"] == "below floor"
    assert pd.isna(few["break_even"]) and pd.isna(few["break_even_requests"])
    assert tuned["verdict"] == "not kept: floor/few_shot"
    summary = out["summary"].read_text()
    assert (
        "  Against floor/few_shot: the best cell train.lr=0.001: below floor (-10.0 points "
        "[-14.0, -6.0] on validation); cost only: 1.39 EUR per million requests for the "
        "fine-tune run-a/int8_dynamic, 111.11 EUR per million requests for this floor (no "
        "break-even: their quality differs, the cell is below floor)."
    ) in after_verdict(summary).splitlines()
    assert "pays back" not in summary and "the kept cell" not in after_verdict(summary)


def test_against_a_floor_the_cell_is_not_shown_above_the_break_even_says_so(tmp_path):
    verdict = floor_kept("not shown above floor", 0.02, -0.03, 0.07)
    out = run_stage(tmp_path, prompted_floors(tmp_path, verdict=verdict))
    few = pd.read_parquet(out["serving_parquet"]).set_index("variant").loc["floor/few_shot"]
    assert (few["break_even"], few["break_even_requests"]) == ("after", 36447.0)
    assert (
        "  Against floor/few_shot: the best cell train.lr=0.001: not shown above floor (+2.0 "
        "points [-3.0, +7.0] on validation); if their quality is equal — the evaluation has not "
        "shown the fine-tune above this floor — the fine-tune run-a/int8_dynamic pays back after "
        "36,447 requests."
    ) in after_verdict(out["summary"].read_text()).splitlines()


def test_a_damaged_predictions_frame_is_one_line_naming_the_file(tmp_path):
    inputs = prompted_floors(tmp_path)
    damaged = tmp_path / "run-a" / "int8_dynamic" / "predictions_test.parquet"
    damaged.write_bytes(b"not a parquet file")
    with pytest.raises(CampaignError, match=r"predictions_test.parquet: not a readable Parquet"):
        run_stage(tmp_path, inputs)
    assert not (tmp_path / "out" / "serving.parquet").exists()
