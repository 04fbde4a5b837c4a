"""nf4: bitsandbytes 4-bit NormalFloat weights (blocks of 64, bfloat16 compute), loaded through
transformers' BitsAndBytesConfig; its kernels are CUDA only here. The task head stays in
bfloat16."""

METHOD = "bitsandbytes Linear4bit nf4, compute dtype bfloat16, via BitsAndBytesConfig"
LIBRARY = "bitsandbytes"
DEVICES = ("cuda",)
FORMAT = "state_dict"


def apply(model, ctx):
    import torch
    import transformers as tf

    config = tf.BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16,
        llm_int8_skip_modules=["classifier", "score", "lm_head"],
    )
    return ctx.saved.load(
        dtype=torch.bfloat16, quantization_config=config, device_map={"": ctx.device.index or 0}
    )
