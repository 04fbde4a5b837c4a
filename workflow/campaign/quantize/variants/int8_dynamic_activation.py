"""int8_dynamic_activation: torchao int8 weights (per channel) and int8 activations quantized
per token at run time (W8A8 dynamic). On a CPU torchao has no fast kernel for it: it is correct
and slow there (the table says how slow)."""

from campaign.quantize.variants import torchao_linear

METHOD = "torchao quantize_(Int8DynamicActivationInt8WeightConfig()) on nn.Linear"
LIBRARY = "torchao"
DEVICES = ("cpu", "cuda")
FORMAT = "state_dict"

apply = torchao_linear("Int8DynamicActivationInt8WeightConfig")
