"""quanto_int8: optimum-quanto int8 weights (per output channel), activations in fp32; frozen
(the int8 weights are materialized, not re-quantized at every forward)."""

from campaign.quantize.variants import quanto_weights

METHOD = "optimum.quanto quantize(weights=qint8) + freeze on nn.Linear"
LIBRARY = "optimum-quanto"
DEVICES = ("cpu", "cuda")
FORMAT = "state_dict"

apply = quanto_weights("qint8")
