"""A validation prompt far past the model's positions ends the preflight in the memory check's
one-line refusal, quickly and within a memory bound: nothing generates from that prompt first.

Before that bound was asked first, the resume check generated from the sample's whole prompts,
and a 100,000-character one (36,016 tokens of the tiny tokenizer) batched beside a short one
needed a 2 x 36k x 36k attention mask (about 10 GB): the kernel ended the preflight before the
line was written. The run here is a subprocess whose address space is capped at 2 GiB above what
its imports mapped, so a regression fails this test instead of exhausting the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import env

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
REPO = TESTS.parent
PROMPT_CHARS = 100_000
HEADROOM_BYTES = 2 * 1024**3  # address space allowed above what the imports mapped
MAX_RSS_BYTES = 1536 * 1024**2  # the whole preflight, imports included (about 620 MiB here)
MAX_SECONDS = 90.0  # about 8 s here

_SCRIPT = r"""
import json, resource, sys, time
from pathlib import Path

import torch
import transformers  # noqa: F401  (mapped before the cap)
from trainkit import QA_PAIRS, preflight_config, tiny_generation_spec, write_conversations

from campaign.core.errors import CampaignError
from campaign.data import conversations as conv
from campaign.preflight import report as preflight

folder, chars, headroom = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (mapped + headroom, mapped + headroom))
torch.set_num_threads(1)
talks = [conv.from_prompt_response(q, a) for q, a in QA_PAIRS]
ids = [f"q{i}" for i in range(len(talks))]
question = ("Which tool copies files? " * (chars // 25 + 1))[:chars]
splits = {
    "train": write_conversations(folder, "train", ids, talks),
    # beside a short prompt, so a generation batch pads the long one (the mask is L x L)
    "validation": write_conversations(
        folder, "validation", ["q0", "long"], [talks[0], conv.from_prompt_response(question, "cp")]
    ),
    "test": write_conversations(folder, "test", ids[:2], talks[:2]),
}
spec = tiny_generation_spec(
    positions=128, batch_size=2, max_length=48, micro_batch=2, max_steps=2, eval_every=2,
    checkpoint_every=2,
)
config = preflight_config(["memory", "overfit", "resume"])
t0 = time.perf_counter()
line = None
try:
    report = preflight.run_preflight(spec, splits, config, folder / "work", folder)
    preflight.check_report(report)
except CampaignError as e:
    line = str(e)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"line": line, "seconds": time.perf_counter() - t0, "peak_rss": peak}))
"""


def test_a_prompt_far_past_the_positions_ends_in_the_memory_refusal_within_bounds(tmp_path):
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "workflow"), str(TESTS)])
    e.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), str(PROMPT_CHARS), str(HEADROOM_BYTES)],
        env=e,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    line = out["line"]
    assert line is not None and "\n" not in line
    # The memory check's refusal, naming the item and the limit; the checks that would have
    # generated are named as not run for that reason, not as crashed.
    assert line.startswith("preflight failed (3 blocking): memory: the KV cache of 2 generated")
    assert "validation item long" in line
    assert "more than the model's max_position_embeddings 128" in line
    assert line.endswith("(so overfit, resume could not run)")
    print(f"\nlong prompt: {out['seconds']:.1f} s, peak RSS {out['peak_rss'] / 2**20:.0f} MiB")
    assert out["peak_rss"] < MAX_RSS_BYTES
    assert out["seconds"] < MAX_SECONDS


def test_the_overfit_check_does_not_generate_from_a_conversation_max_length_cut(tmp_path):
    """With model.generation.max_truncated_share allowing a cut answer, a sample conversation
    longer than train.max_length is trained cut: the overfit check names it instead of
    generating from its whole prompt (unbounded by max_length, and its answer cannot come back
    whole anyway)."""
    import torch
    from trainkit import QA_PAIRS, preflight_config, tiny_generation_spec, write_conversations

    from campaign.data import conversations as conv
    from campaign.preflight import bench
    from campaign.preflight import report as preflight

    torch.set_num_threads(1)
    talks = [conv.from_prompt_response(q, a) for q, a in QA_PAIRS]
    long = conv.from_prompt_response(" ".join(["Which tool copies files?"] * 30), "cp")
    ids = ["long", *(f"q{i}" for i in range(len(talks)))]
    splits = {
        "train": write_conversations(tmp_path, "train", ids, [long, *talks]),
        "validation": write_conversations(tmp_path, "validation", ids[1:3], talks[:2]),
        "test": write_conversations(tmp_path, "test", ids[1:3], talks[:2]),
    }
    spec = tiny_generation_spec(max_length=48, micro_batch=2, max_steps=2, eval_every=2,
                                checkpoint_every=2)  # fmt: skip
    spec["model"]["generation"]["max_truncated_share"] = 1.0
    overfit = {"examples": 4, "steps": 3, "max_final_loss": 100.0}  # reached at once
    config = preflight_config(["overfit"], overfit=overfit)
    result = preflight.run_preflight(
        spec, splits, config, tmp_path / "work", tmp_path, only=("overfit",),
        hooks=bench.Hooks(device=torch.device("cpu")),
    )["overfit"]  # fmt: skip
    assert not result["passed"]
    cut = "1 of 4 sample conversations are longer than train.max_length 48 (first long:"
    assert cut in result["summary"]
    assert "generated" not in result["details"]
