"""int8_weight_only: torchao int8 weight-only. nn.Linear weights int8 with a scale per output
channel; activations stay in the model's dtype. Also the base of `train.base_quantization:
int8_weight_only` (LoRA adapters train on top of it)."""

from campaign.quantize.variants import torchao_linear

METHOD = "torchao quantize_(Int8WeightOnlyConfig()) on nn.Linear"
LIBRARY = "torchao"
DEVICES = ("cpu", "cuda")
FORMAT = "state_dict"

apply = torchao_linear("Int8WeightOnlyConfig")
