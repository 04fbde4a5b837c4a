"""The environment report: every key on every machine, JSON-able, None where not applicable."""

from __future__ import annotations

import importlib.metadata
import json

import pytest
import torch

from campaign.preflight import envreport


@pytest.fixture(scope="module")
def report() -> dict:
    return envreport.environment_report()


def test_report_has_every_key_and_is_json(report):
    assert set(envreport.REPORT_KEYS) <= set(report)
    assert json.loads(json.dumps(report)) == report


def test_versions_are_the_installed_ones(report):
    assert report["torch"] == torch.__version__
    assert report["transformers"] == importlib.metadata.version("transformers")
    try:
        peft = importlib.metadata.version("peft")
    except importlib.metadata.PackageNotFoundError:
        peft = None
    assert report["peft"] == peft


def test_attention_implementation_per_architecture(report):
    assert set(report["attn_implementation"]) == {"bert", "gpt2"}
    assert all(v in ("sdpa", "eager") for v in report["attn_implementation"].values())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only report")
def test_cpu_machine_has_no_cuda_fields(report):
    assert report["cuda_available"] is False
    assert report["device_type"] == "cpu" and report["device_count"] == 0
    for key in ("cuda_runtime", "cudnn", "compute_capability", "device_memory_bytes"):
        assert report[key] is None, key
    assert report["sdpa_backends"] is None
    assert report["bf16_check"] == "cpu autocast matmul"
    assert report["bf16_supported"] == envreport.cpu_bf16_works()
    assert report["cpu_count"] >= 1 and report["memory_total_bytes"] > 2**20


def test_missing_nvidia_smi_is_none_not_an_error(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert envreport._nvidia_smi_driver() is None


def test_format_report_one_line_per_key(report):
    text = envreport.format_report(report)
    lines = text.splitlines()
    assert len(lines) == len(report)
    assert lines[0].split()[0] == "python"
    assert f"bert {report['attn_implementation']['bert']}" in text
