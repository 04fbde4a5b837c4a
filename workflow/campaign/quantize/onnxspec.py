"""What the ONNX Runtime variants declare alike: the export's opset and inputs, and why a causal
LM is not exported. Standard library only: the DAG lists the variants (a variant's METHOD is
part of every job's key) on every `snakemake` call and in every cluster job, and
campaign.quantize.onnxrt, which builds and serves the models, imports torch."""

OPSET = 18
INPUTS = ("input_ids", "attention_mask")
# Why a causal LM row is skipped (campaign.quantize.variant: NEEDS_NOTE).
CAUSAL_NOTE = "the ONNX export here has no KV-cache inputs/outputs (past_key_values) for generation"
