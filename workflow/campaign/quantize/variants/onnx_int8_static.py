"""onnx_int8_static: the ONNX export quantized by onnxruntime.quantization.quantize_static:
weights int8 per channel, activations uint8 with static scales from MinMax calibration on a
sample of the train split (quantization.calibration; never evaluation data), QDQ format."""

from campaign.quantize.onnxspec import CAUSAL_NOTE, OPSET

METHOD = (
    f"torch.onnx.export(dynamo=False, opset_version={OPSET}); "
    "onnxruntime.quantization.quantize_static(QDQ, activations=QUInt8, weights=QInt8 "
    "per_channel, op_types=MatMul+Gemm, MinMax calibration)"
)
LIBRARY = "onnxruntime"
ALSO_LIBRARIES = ("onnx",)
DEVICES = ("cpu",)
FORMAT = "onnx"
CALIBRATION = True
NEEDS = ("classification_head",)
NEEDS_NOTE = CAUSAL_NOTE


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
