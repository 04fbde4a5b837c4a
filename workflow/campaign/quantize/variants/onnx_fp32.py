"""onnx_fp32: the trained model exported to ONNX and served by ONNX Runtime on the CPU, fp32
(the ONNX reference: the speed of the runtime alone, no quantization)."""

from campaign.quantize.onnxspec import CAUSAL_NOTE, OPSET

METHOD = f"torch.onnx.export(dynamo=False, opset_version={OPSET}); onnxruntime CPU session, fp32"
LIBRARY = "onnxruntime"
ALSO_LIBRARIES = ("onnx",)
DEVICES = ("cpu",)
FORMAT = "onnx"
NEEDS = ("classification_head",)
NEEDS_NOTE = CAUSAL_NOTE


def apply(model, ctx):
    from campaign.quantize.onnxrt import build

    return build(model)
