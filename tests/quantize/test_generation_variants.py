"""The quantize stage on a generation run (a tiny Llama with grouped-query attention, saved as
the run's model): every variant generates on the same validation and test prompts through the
shared engine, its predictions carry the per-item score, and what it costs is measured. The
references are what the full-precision model generates, so fp32 keeps every answer, the 4-bit
cache most of them and the kv_corrupt canary almost none; ONNX is skipped with its reason."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from genkit import WORDS, tiny_llama, tiny_tokenizer

from campaign.data import conversations as conv
from campaign.quantize.stage import quantize_run
from campaign.tasks.generation import chat as gen
from campaign.tasks.generation.text_scores import score_items
from campaign.train.engine import generate

pytestmark = pytest.mark.usefixtures("one_thread")

MODEL = {"chat_template": "none", "generation": {"metric": "exact_match", "max_new_tokens": 6}}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run's model folder, its split files (references: the fp32 model's own greedy
    answers) and its predictions (those answers, scored 1)."""
    folder = tmp_path_factory.mktemp("genrun")
    model, tok = tiny_llama(seed=2), tiny_tokenizer()
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    (folder / "manifest.json").write_text(json.dumps({"labels": []}))
    inputs = {
        "model": [folder / "model"],
        "run_manifest": [folder / "manifest.json"],
    }
    for k, split in enumerate(("train", "validation", "test")):
        prompts = [" ".join(WORDS[(i * 7 + k) % len(WORDS) :][:5]) for i in range(12)]
        talks = [conv.from_prompt_response(p, "x") for p in prompts]
        ids = [gen.prompt_ids(tok, gen.PLAIN_TEMPLATE, t) for t in talks]
        out = generate(model, tok, ids, max_new_tokens=6, batch_size=8, eos_token_ids=[2])
        talks = [
            t[:-1] + [{"role": "assistant", "content": a}]
            for t, a in zip(talks, out.texts, strict=True)
        ]
        frame = pd.DataFrame(
            {
                "id": [f"{split}{i}" for i in range(12)],
                "text": [conv.dedup_text(t) for t in talks],
                "messages": [conv.dump_messages(t) for t in talks],
            }
        )
        inputs[split] = [folder / f"{split}.parquet"]
        frame.to_parquet(inputs[split][0])
        if split != "train":
            own = frame[["id"]].assign(prediction=out.texts, reference=out.texts, score=1.0)
            inputs[f"predictions_{split}"] = [folder / f"own_{split}.parquet"]
            own.to_parquet(inputs[f"predictions_{split}"][0])
    return folder, inputs


def quantize(run, variant: str, tmp_path):
    folder, inputs = run
    spec = {
        "run": "r1",
        "task": "generation",
        "model": MODEL,
        "max_length": 64,
        "batch_size": 4,
        "variant": {"name": variant, "library_version": "x"},
        "calibration": None,
        "generation": None,
        "timing": {"batch_size": 4, "batches": 1, "warmup_batches": 0, "repeats": 1},
    }
    out = tmp_path / variant
    outputs = {
        "model": out / "model",
        "predictions_validation": out / "predictions_validation.parquet",
        "predictions_test": out / "predictions_test.parquet",
        "result": out / "result.json",
        "measurements": out / "measurements.json",
    }
    out.mkdir()
    result = quantize_run(spec, inputs, outputs, "cpu", root=folder)
    frames = {s: pd.read_parquet(outputs[f"predictions_{s}"]) for s in ("validation", "test")}
    return result, frames, json.loads(outputs["measurements"].read_text())


def mean_score(frame) -> float:
    """What the evaluation scores a variant's generations by here (MODEL's exact_match)."""
    return float(
        score_items("exact_match", list(frame["prediction"]), list(frame["reference"])).mean()
    )


def test_variants_are_judged_on_what_they_generate(run, tmp_path):
    fp32, frames, measured = quantize(run, "fp32", tmp_path)
    assert fp32["status"] == "ok" and "score" not in fp32  # the evaluation scores the texts
    assert mean_score(frames["validation"]) == mean_score(frames["test"]) == 1.0
    assert tuple(frames["test"].columns) == gen.PREDICTION_COLUMNS
    assert frames["test"]["id"].tolist() == [f"test{i}" for i in range(12)]
    assert fp32["agreement"]["test"]["rate"] == 1.0
    # the full-precision cache is as large as the analytic estimate at the batch size used
    assert fp32["kv_cache"]["bytes"] == fp32["kv_cache"]["estimate_fp32"] > 0
    assert measured["timing"]["tokens_per_s"] > 0 and measured["timing"]["latency_ms_p50"] > 0

    q4, q4_frames, _ = quantize(run, "kv_int4", tmp_path)
    bad, bad_frames, _ = quantize(run, "kv_corrupt", tmp_path)
    assert q4["kv_cache"]["kind"] == bad["kv_cache"]["kind"] == "kv_cache"
    assert 0 < q4["kv_cache"]["bytes"] < q4["kv_cache"]["estimate_fp32"]
    q4_score, bad_score = mean_score(q4_frames["test"]), mean_score(bad_frames["test"])
    assert q4_score >= 0.5
    assert bad_score <= 0.3 < q4_score - bad_score


def test_onnx_is_skipped_for_generation_with_its_reason(run, tmp_path):
    result, frames, _ = quantize(run, "onnx_fp32", tmp_path)
    assert result["status"] == "skipped"
    assert "this run is generation" in result["reason"] and "KV-cache" in result["reason"]
    assert frames["test"].empty
