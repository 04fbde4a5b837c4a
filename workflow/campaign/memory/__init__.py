"""Memory: how much accelerator memory a run needs (an analytic estimate from the config), what
a real training step holds (a measurement), and whether a recipe fits each target card.

Not a phase of its own (no stage): the preflight checks the estimate against a measurement, and
later phases (quantization, budget) price their variants with it.
"""

from campaign.core.lazy import exports

_PUBLIC = {
    "FP32_BYTES": "shape",
    "GIB": "shape",
    "ModelShape": "shape",
    "analytic_parameter_count": "shape",
    "count_parameters": "shape",
    "kv_cache_bytes": "shape",
    "model_shape": "shape",
    "activation_bytes": "activations",
    "attention_kernel": "activations",
    "ASSUMPTIONS": "estimate",
    "MemoryEstimate": "estimate",
    "estimate_memory": "estimate",
    "SavedTensorBytes": "measure",
    "cache_tensor_bytes": "measure",
    "measure_kv_cache": "measure",
    "measure_memory": "measure",
    "compare": "fit",
    "fit_table": "fit",
    "format_bytes": "format",
    "format_comparison": "format",
    "format_fit_table": "format",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)
