"""quanto_int4: optimum-quanto int4 weights in groups along the input, activations in fp32;
frozen. Predicts under torch.no_grad (quanto's int4 tensors fail under torch.inference_mode:
"Cannot set version_counter")."""

from campaign.quantize.variants import quanto_weights

METHOD = "optimum.quanto quantize(weights=qint4) + freeze on nn.Linear"
LIBRARY = "optimum-quanto"
DEVICES = ("cpu", "cuda")
FORMAT = "state_dict"
INFERENCE = "no_grad"

apply = quanto_weights("qint4")
