"""quanto_int8: optimum-quanto int8 weights (per output channel), activations in fp32; frozen
(the int8 weights are materialized, not re-quantized at every forward)."""

METHOD = "optimum.quanto quantize(weights=qint8) + freeze on nn.Linear"
LIBRARY = "optimum-quanto"
DEVICES = ("cpu", "cuda")
FORMAT = "state_dict"


def apply(model, ctx):
    from optimum.quanto import freeze, qint8, quantize

    from campaign.quantize.variants import linear_layers

    linear_layers(model)
    model = model.to(ctx.device)
    quantize(model, weights=qint8)
    freeze(model)
    return model
