"""Memory: how much accelerator memory a run needs (an analytic estimate from the config for BERT
and GPT-2; for any other architecture, real passes at two micro-batch sizes extrapolated), what a
real training step holds (a measurement), whether a recipe fits each target card, and the levers
that would make it fit.

Not a phase of its own (no stage): the preflight checks the estimate against a measurement, and
later phases (quantization, budget) price their variants with it.
"""

from campaign.core.lazy import exports

_PUBLIC = {
    "ANALYTIC_FAMILIES": "shape",
    "FP32_BYTES": "shape",
    "GIB": "shape",
    "ModelShape": "shape",
    "UnknownArchitecture": "shape",
    "analytic_family": "shape",
    "analytic_parameter_count": "shape",
    "count_parameters": "shape",
    "kv_cache_bytes": "shape",
    "model_shape": "shape",
    "activation_bytes": "activations",
    "attention_kernel": "activations",
    "eval_activation_bytes": "activations",
    "ASSUMPTIONS": "estimate",
    "MemoryEstimate": "estimate",
    "estimate_memory": "estimate",
    "setting": "estimate",
    "LiveTensorBytes": "measure",
    "SavedTensorBytes": "measure",
    "cache_tensor_bytes": "measure",
    "eval_peak": "measure",
    "measure_kv_cache": "measure",
    "measure_memory": "measure",
    "parameter_bytes": "measure",
    "step_peak": "measure",
    "track_peak": "measure",
    "no_cycle_collection": "measure",
    "MEASURED_ASSUMPTIONS": "probe",
    "PROBE_BATCHES": "probe",
    "Subject": "probe",
    "default_lora_targets": "probe",
    "estimate_from_probe": "probe",
    "extrapolate": "probe",
    "linear_fit": "probe",
    "measured_estimate": "probe",
    "meta_parameter_bytes": "probe",
    "probe_memory": "probe",
    "wrap_lora": "probe",
    "LEVERS": "levers",
    "analytic_variants": "levers",
    "lever_rows": "levers",
    "measured_variants": "levers",
    "need_at": "levers",
    "packed_rows": "levers",
    "with_costs": "levers",
    "lever_costs": "costs",
    "compare": "fit",
    "fit_table": "fit",
    "format_bytes": "format",
    "format_comparison": "format",
    "format_fit_table": "format",
    "format_levers": "format",
    "format_lever_costs": "format",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)
