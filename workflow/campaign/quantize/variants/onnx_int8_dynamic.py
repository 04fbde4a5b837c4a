"""onnx_int8_dynamic: the ONNX export quantized by onnxruntime.quantization.quantize_dynamic:
MatMul and Gather weights int8 per tensor (the word embeddings too, which no torch variant
quantizes), activations quantized per batch at run time."""

# The declarations every ONNX Runtime variant shares (LIBRARY, DEVICES, FORMAT, NEEDS, ...).
from campaign.quantize.onnxspec import ALSO_LIBRARIES as ALSO_LIBRARIES
from campaign.quantize.onnxspec import DEVICES as DEVICES
from campaign.quantize.onnxspec import FORMAT as FORMAT
from campaign.quantize.onnxspec import LIBRARY as LIBRARY
from campaign.quantize.onnxspec import NEEDS as NEEDS
from campaign.quantize.onnxspec import NEEDS_NOTE as NEEDS_NOTE
from campaign.quantize.onnxspec import OPSET

METHOD = (
    f"torch.onnx.export(dynamo=False, opset_version={OPSET}); "
    "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8, per_channel=False)"
)


def _quantize(source, target):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=False)


def apply(model, ctx):
    from campaign.quantize.onnxrt import build

    return build(model, _quantize)
