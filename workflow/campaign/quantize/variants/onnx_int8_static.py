"""onnx_int8_static: the ONNX export quantized by onnxruntime.quantization.quantize_static:
weights int8 per channel, activations uint8 with static scales from MinMax calibration on a
sample of the train split (quantization.calibration; never evaluation data), QDQ format."""

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
    "onnxruntime.quantization.quantize_static(QDQ, activations=QUInt8, weights=QInt8 "
    "per_channel, op_types=MatMul+Gemm, MinMax calibration)"
)
CALIBRATION = True


def apply(model, ctx):
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    from campaign.quantize.onnxrt import CalibrationReader, build

    def quantize(source, target):
        quantize_static(
            str(source),
            str(target),
            CalibrationReader(ctx.calibration),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul", "Gemm"],
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )

    return build(model, quantize)
