"""One run on several devices (train.devices): 2 gloo processes on the CPU and 1 process with
twice the accumulation give the same gradients (float64) and the same final weights (float32),
and the same run id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from trainkit import REPO, context, tiny_spec, write_splits

from campaign.plan import run_id
from campaign.train import run_training
from campaign.train.distributed import launch_command

# Builds the run's Trainer (its rank from torchrun's environment), takes the first global batch,
# computes its gradients in float64 and (rank 0) saves them: argv spec.json inputs.json out.pt.
GRADIENTS = """
import json, sys
from pathlib import Path
import torch
from campaign.train.loop import Trainer, read_data
spec = json.loads(Path(sys.argv[1]).read_text())
inputs = {k: [Path(p) for p in v] for k, v in json.loads(Path(sys.argv[2]).read_text()).items()}
trainer = Trainer(spec, read_data(inputs), Path(sys.argv[3]).parent / "work", stream=sys.stderr)
trainer.model.double()
trainer.backward(trainer.order.take(trainer.recipe.batch_examples))
if trainer.rank == 0:
    grads = {n: p.grad for n, p in trainer.model.named_parameters() if p.grad is not None}
    torch.save(grads, sys.argv[3])
"""


def split_specs(**train) -> tuple[dict, dict]:
    """(2 devices x grad_accum 1, 1 device x grad_accum 2): the same effective batch."""
    two = tiny_spec(micro_batch=4, grad_accum=1, devices=2, **train)
    one = tiny_spec(micro_batch=4, grad_accum=2, devices=1, **train)
    return two, one


def test_the_run_id_counts_the_effective_batch_not_its_split():
    two, one = split_specs()
    assert run_id(two) == run_id(one)
    assert run_id(tiny_spec(micro_batch=4, grad_accum=1)) == run_id(
        tiny_spec(micro_batch=4, grad_accum=1, devices=1)
    )  # a spec without the key keeps its id
    assert run_id(tiny_spec(micro_batch=4, grad_accum=1, devices=4)) != run_id(two)


def test_launch_is_torchrun_locally_and_srun_under_slurm(tmp_path):
    local = launch_command(2, tmp_path / "r.json", env={})
    assert local[1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert "--nproc-per-node=2" in local and local[-3:-1] == ["-m", "campaign.train.execution"]


def gradients(tmp_path: Path, spec: dict, inputs: dict, processes: int) -> dict:
    folder = tmp_path / f"grads{processes}"
    folder.mkdir()
    script = folder / "grads.py"
    script.write_text(GRADIENTS)
    (folder / "spec.json").write_text(json.dumps(spec))
    (folder / "inputs.json").write_text(
        json.dumps({k: [str(p) for p in v] for k, v in inputs.items()})
    )
    args = [str(folder / "spec.json"), str(folder / "inputs.json"), str(folder / "g.pt")]
    if processes > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        cmd += [f"--nproc-per-node={processes}", str(script), *args]
    else:
        cmd = [sys.executable, str(script), *args]
    env = {"PYTHONPATH": str(REPO / "workflow"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(folder / "g.pt")


@pytest.mark.slow
def test_two_gloo_processes_equal_one_process_with_twice_the_accumulation(tmp_path):
    inputs = write_splits(tmp_path / "splits", n_train=48, n_eval=16)
    two, one = split_specs(max_steps=4, eval_every=4, checkpoint_every=4)
    # Gradients of the first global batch, float64, dropout on (seeded per micro-batch).
    g2 = gradients(tmp_path, two, inputs, processes=2)
    g1 = gradients(tmp_path, one, inputs, processes=1)
    assert g2.keys() == g1.keys() and g1
    worst = max(float((g2[n] - g1[n]).abs().max()) for n in g1)
    scale = max(float(g1[n].abs().max()) for n in g1)
    print(f"float64 gradients: max |diff| {worst:.3g} (largest |grad| {scale:.3g})")
    assert worst <= 1e-12 * max(scale, 1.0)

    # Whole runs through the stage: 2 processes (torchrun, gloo) against 1 with accumulation 2.
    split = context(two, inputs, tmp_path / "two")
    from campaign.train.stage import stage

    stage(split)
    whole = context(one, inputs, tmp_path / "one")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker computes (torchrun's OMP_NUM_THREADS=1)
    try:
        run_training(whole.spec, whole.inputs, whole.outputs, whole.work_dir, REPO)
    finally:
        torch.set_num_threads(threads)
    from safetensors.torch import load_file

    w2 = load_file(next((split.outputs["model"]).glob("*.safetensors")))
    w1 = load_file(next((whole.outputs["model"]).glob("*.safetensors")))
    assert w2.keys() == w1.keys()
    worst = max(float((w2[n].double() - w1[n].double()).abs().max()) for n in w1)
    bitwise = all(torch.equal(w2[n], w1[n]) for n in w1)
    print(f"float32 final weights after 4 steps: max |diff| {worst:.3g}, bitwise {bitwise}")
    assert worst <= 1e-5
    # The sums are the same additions (a + b of two micro-batches' gradients), so with equal
    # thread counts the weights come out bit for bit.
    assert bitwise
    manifest = json.loads(split.outputs["run_manifest"].read_text())
    assert manifest["examples_seen"] == 4 * 8
    timings = json.loads(split.outputs["timings"].read_text())
    assert timings["processes"] == {"count": 2, "launcher": "torchrun"}
    timings = json.loads(whole.outputs["timings"].read_text())
    assert timings["processes"] == {"count": 1, "launcher": "one process"}
