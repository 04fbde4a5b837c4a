"""quanto_w8a8: optimum-quanto int8 weights and int8 activations with static scales, calibrated
on a sample of the train split (quantization.calibration; never evaluation data)."""

METHOD = "optimum.quanto quantize(weights=qint8, activations=qint8) + Calibration + freeze"
LIBRARY = "optimum-quanto"
DEVICES = ("cpu", "cuda")
FORMAT = "state_dict"
CALIBRATION = True


def apply(model, ctx):
    import torch
    from optimum.quanto import Calibration, freeze, qint8, quantize

    from campaign.quantize.variants import on_device_linear

    model = on_device_linear(model, ctx)
    quantize(model, weights=qint8, activations=qint8)
    with torch.no_grad(), Calibration():
        for batch in ctx.calibration:
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    freeze(model)
    return model
