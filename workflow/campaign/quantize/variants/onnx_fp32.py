"""onnx_fp32: the trained model exported to ONNX and served by ONNX Runtime on the CPU, fp32
(the ONNX reference: the speed of the runtime alone, no quantization)."""

# The declarations every ONNX Runtime variant shares (LIBRARY, DEVICES, FORMAT, NEEDS, ...).
from campaign.quantize.onnxspec import ALSO_LIBRARIES as ALSO_LIBRARIES
from campaign.quantize.onnxspec import DEVICES as DEVICES
from campaign.quantize.onnxspec import FORMAT as FORMAT
from campaign.quantize.onnxspec import LIBRARY as LIBRARY
from campaign.quantize.onnxspec import NEEDS as NEEDS
from campaign.quantize.onnxspec import NEEDS_NOTE as NEEDS_NOTE
from campaign.quantize.onnxspec import OPSET

METHOD = f"torch.onnx.export(dynamo=False, opset_version={OPSET}); onnxruntime CPU session, fp32"


def apply(model, ctx):
    from campaign.quantize.onnxrt import build

    return build(model)
