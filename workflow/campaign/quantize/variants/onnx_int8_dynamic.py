"""onnx_int8_dynamic: the ONNX export quantized by onnxruntime.quantization.quantize_dynamic:
MatMul and Gather weights int8 per tensor (the word embeddings too, which no torch variant
quantizes), activations quantized per batch at run time."""

from campaign.quantize.onnxspec import CAUSAL_NOTE, OPSET

METHOD = (
    f"torch.onnx.export(dynamo=False, opset_version={OPSET}); "
    "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8, per_channel=False)"
)
LIBRARY = "onnxruntime"
ALSO_LIBRARIES = ("onnx",)
DEVICES = ("cpu",)
FORMAT = "onnx"
NEEDS = ("classification_head",)
NEEDS_NOTE = CAUSAL_NOTE


def _quantize(source, target):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=False)


def apply(model, ctx):
    from campaign.quantize.onnxrt import build

    return build(model, _quantize)
