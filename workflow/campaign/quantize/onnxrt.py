"""ONNX Runtime variants' shared part: export a trained classifier to ONNX, quantize the file
with onnxruntime.quantization, and serve it behind the call the phase scores and times a torch
model with (`model(input_ids=, attention_mask=).logits`), so scoring, timing, peak memory and
agreement are the phase's own code, the same as for every torch variant.

The export is torch.onnx.export's TorchScript exporter (dynamo=False): on two loaded cores it
exports a small BERT in about 2 s where the dynamo exporter takes about 30 s, and its logits
equal torch's within float rounding. Batch and sequence axes are dynamic, so the session runs
the phase's own (padded-to-longest) batches. A causal LM is not exported: its generation needs
the KV cache as graph inputs and outputs (past_key_values), which this export does not build.

Heavy imports (onnx, onnxruntime) happen inside the functions, and the variants read their
constants from campaign.quantize.onnxspec: listing variants imports nothing (not even torch).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import torch

from campaign.quantize.onnxspec import INPUTS, OPSET


class _Logits(torch.nn.Module):
    """The classifier as a function of (input_ids, attention_mask) -> logits: the graph's only
    inputs and output."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def export(model, path: Path) -> None:
    """Write `model` (a transformers sequence classifier, fp32, CPU) to `path` as ONNX."""
    model = model.eval()
    # A padded example, so the traced mask arithmetic is the general one.
    ids = torch.ones((2, 8), dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    with torch.no_grad():
        torch.onnx.export(
            _Logits(model),
            (ids, mask),
            str(path),
            input_names=list(INPUTS),
            output_names=["logits"],
            dynamic_axes={**axes, "logits": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )


class OnnxModel(torch.nn.Module):
    """An ONNX Runtime CPU session over one model file's bytes, with the torch model's call.

    Threads: intra-op as torch's (torch.get_num_threads(), which the job pins), inter-op 1,
    so an ONNX row is timed on the same cores as the torch rows.
    """

    def __init__(self, data: bytes, config):
        super().__init__()
        import onnxruntime as ort

        self.data = data
        self.config = config
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])

    def forward(self, input_ids, attention_mask, **_ignored):
        feed = {
            "input_ids": input_ids.cpu().numpy().astype("int64", copy=False),
            "attention_mask": attention_mask.cpu().numpy().astype("int64", copy=False),
        }
        (logits,) = self.session.run(["logits"], feed)
        return SimpleNamespace(logits=torch.from_numpy(logits))

    def state_dict(self, *args, **kwargs):
        """The graph's initializers (weights, and for int8 their scales and zero points) as
        tensors, so the phase counts their bytes as it does a torch variant's."""
        import onnx
        from onnx import numpy_helper

        graph = onnx.load_from_string(self.data).graph
        return {
            t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer
        }

    def save(self, folder: Path) -> str:
        """Write the model file (what a user ships) and config.json into `folder`; its name."""
        from campaign.quantize.variant import WEIGHT_FILES

        (Path(folder) / WEIGHT_FILES["onnx"]).write_bytes(self.data)
        self.config.to_json_file(str(Path(folder) / "config.json"))
        return WEIGHT_FILES["onnx"]


def build(model, quantize: Callable[[Path, Path], None] | None = None) -> OnnxModel:
    """Export `model`, quantize the file with quantize(fp32_path, out_path) when given, and
    serve the result. Files live in a temporary folder, removed before this returns."""
    config = model.config
    with tempfile.TemporaryDirectory(prefix="onnx-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        export(model, fp32)
        out = fp32
        if quantize is not None:
            out = Path(tmp) / "int8.onnx"
            quantize(fp32, out)
        data = out.read_bytes()
    return OnnxModel(data, config)


class CalibrationReader:
    """onnxruntime.quantization's calibration data reader over the phase's calibration batches
    (train split only): one feed per batch, in order."""

    def __init__(self, batches: list[dict]):
        self.feeds = iter(
            [{name: b[name].cpu().numpy().astype("int64") for name in INPUTS} for b in batches]
        )

    def get_next(self):
        return next(self.feeds, None)

    def rewind(self) -> None:  # not needed by MinMax calibration, which reads once
        raise NotImplementedError
