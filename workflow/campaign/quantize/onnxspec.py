"""What the ONNX Runtime variants declare alike: the export's opset and inputs, and why a causal
LM is not exported. Standard library only: the DAG lists the variants (a variant's METHOD is
part of every job's key) on every `snakemake` call and in every cluster job, and
campaign.quantize.onnxrt, which builds and serves the models, imports torch."""

OPSET = 18
INPUTS = ("input_ids", "attention_mask")
# Why a causal LM row is skipped (campaign.quantize.variant: NEEDS_NOTE).
CAUSAL_NOTE = "the ONNX export here has no KV-cache inputs/outputs (past_key_values) for generation"

# What every ONNX Runtime variant declares (campaign.quantize.variants): the runtime and the
# export's library, served on the CPU from an .onnx file, classifiers only.
LIBRARY = "onnxruntime"
ALSO_LIBRARIES = ("onnx",)
DEVICES = ("cpu",)
FORMAT = "onnx"
NEEDS = ("classification_head",)
NEEDS_NOTE = CAUSAL_NOTE
