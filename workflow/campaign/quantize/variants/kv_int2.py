"""kv_int2: fp32 weights, and a generation cache quantized to 2 bits by optimum-quanto
(transformers' QuantizedCache). Causal LM runs only. kv_int4 with half the bits: it declares
the rest as kv_int4 does."""

from campaign.quantize.variants.kv_int4 import CACHE as _INT4_CACHE
from campaign.quantize.variants.kv_int4 import DEVICES as DEVICES
from campaign.quantize.variants.kv_int4 import FORMAT as FORMAT
from campaign.quantize.variants.kv_int4 import LIBRARY as LIBRARY
from campaign.quantize.variants.kv_int4 import NEEDS as NEEDS
from campaign.quantize.variants.kv_int4 import apply as apply

METHOD = "fp32 weights; transformers QuantizedCache(backend=quanto, nbits=2, q_group_size=16)"
CACHE = {**_INT4_CACHE, "nbits": 2}
