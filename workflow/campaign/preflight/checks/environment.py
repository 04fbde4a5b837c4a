"""environment: versions and device; the requested precision runs on this device."""

from __future__ import annotations

import torch

from campaign.core.errors import CampaignError
from campaign.preflight.bench import Bench, Result
from campaign.train import autocast, check_precision, device_info

ORDER = 10  # place in the report
VOLATILE = ("device", "report")  # host and driver facts


def _precision_smoke(device, precision: str) -> dict:
    """A linear layer forward + backward under the recipe's autocast, on the device."""
    expected = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    gen = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(32, 32).to(device)
    x = torch.randn(8, 32, generator=gen).to(device)
    with autocast(device, precision):
        out = layer(x)
    loss = out.float().pow(2).mean()
    loss.backward()
    grad = layer.weight.grad
    return {
        "output_dtype": str(out.dtype).removeprefix("torch."),
        "expected_dtype": str(expected).removeprefix("torch."),
        "grad_dtype": str(grad.dtype).removeprefix("torch."),
        "finite": bool(torch.isfinite(loss).item() and torch.isfinite(grad).all().item()),
        "ok": out.dtype == expected and bool(torch.isfinite(grad).all().item()),
    }


def run(bench: Bench) -> Result:
    report = bench.hooks.environment_report()
    device, precision = bench.device, bench.recipe.precision
    problems: list[str] = []
    smoke = None
    try:
        check_precision(device, precision)
    except CampaignError as e:
        problems.append(str(e))
    if not problems:
        try:
            smoke = _precision_smoke(device, precision)
        except RuntimeError as e:
            problems.append(f"train.precision: {precision} failed on {device.type}: {e}")
        else:
            if not smoke["ok"]:
                problems.append(
                    f"train.precision: {precision} autocast gave {smoke['output_dtype']} "
                    f"(finite: {smoke['finite']}) on {device.type}"
                )
    if precision == "bf16" and report.get("bf16_supported") is False:
        problems.append(f"train.precision: bf16 is not supported on {report.get('device_name')}")
    if bench.recipe.lora is not None and report.get("peft") is None:
        problems.append("train.lora: needs the peft package, which is not installed")
    info = device_info(device)
    details = {
        "device": info,
        "precision": precision,
        "precision_smoke": smoke,
        "problems": problems,
        "report": report,
    }
    return Result.of(
        problems,
        details,
        lambda: (
            f"{precision} runs on {device.type} ({info.get('name')}); torch "
            f"{report.get('torch')}, transformers {report.get('transformers')}"
        ),
    )


def describe(d: dict) -> list[str]:
    from campaign.preflight import envreport

    lines = [f"precision {d.get('precision')}: smoke test {d.get('precision_smoke')}"]
    lines += [f"problem: {p}" for p in d.get("problems", [])]
    if isinstance(d.get("report"), dict):
        lines += envreport.format_report(d["report"]).splitlines()
    return lines
