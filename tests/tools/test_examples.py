"""The SmolLM2 example campaigns (examples/smollm2-debian/, docs/generation.md "Example: SmolLM2
on Debian package descriptions"): the params validate and ask what the page says they ask, and
the corpus commands the page gives make, from this machine's installed packages, files the
manifest's reader takes with the params' own data section. Cheap: no model is loaded and
nothing trains (the example campaign itself is run by hand; its numbers are in
docs/development.md)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from campaign.core.params import validate
from campaign.data.readers import load_records
from campaign.plan import plan_index

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "smollm2-debian"
PAGE = REPO / "docs" / "generation.md"
HEADING = "## Example: SmolLM2 on Debian package descriptions"
METRICS = {"describe": "token_f1", "extract": "json_fields"}


def _params(task: str) -> dict:
    return yaml.safe_load((EXAMPLES / f"{task}.yaml").read_text())


def _page_section() -> str:
    text = PAGE.read_text()
    assert HEADING in text, f"docs/generation.md: no heading {HEADING!r}"
    body = text.split(HEADING, 1)[1]
    return re.split(r"\n#{2,3} ", body, maxsplit=1)[0]


def _corpus_commands() -> dict[str, list[str]]:
    """The page's corpus command per task, as argv."""
    commands = {}
    for line in _page_section().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("python scripts/corpora/debian_descriptions.py"):
            argv = shlex.split(line)
            commands[argv[argv.index("--task") + 1]] = argv
    return commands


@pytest.mark.parametrize("task", sorted(METRICS))
def test_the_example_params_validate_and_plan_two_seeds_by_two_levels(task):
    params = validate(_params(task), f"{task}.yaml")
    runs = plan_index(params)
    assert len(runs) == 4
    assert params["ablation"]["seeds"] == [1, 2]
    assert [len(v) for v in params["ablation"]["factors"]["train"].values()] == [2]
    assert params["model"]["task"] == "generation"
    # Decided on the score the runs generate with, against the two generative floors.
    assert params["model"]["generation"]["metric"] == METRICS[task]
    assert sorted(params["evaluation"]["floor"]) == ["retrieval", "zero_shot"]
    # The model folder the model script writes, and the file the page's command writes.
    sys.path.insert(0, str(REPO / "scripts" / "models"))
    try:
        import smollm2
    finally:
        sys.path.remove(str(REPO / "scripts" / "models"))
    assert params["model"]["source"] == str(smollm2.DEFAULT_OUT)
    argv = _corpus_commands()[task]
    assert params["data"]["sources"][0]["path"] == argv[2]


@pytest.mark.parametrize("task", sorted(METRICS))
def test_the_documented_corpus_command_makes_what_the_manifest_reads(task, tmp_path):
    argv = _corpus_commands()[task]
    argv = [sys.executable, str(REPO / argv[1]), *argv[2:]]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    if done.returncode == 3:  # another machine with fewer packages installed
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    params = _params(task)
    records = load_records(params["data"]["sources"], params["data"]["fields"], tmp_path)
    limit = int(argv[argv.index("--limit") + 1])
    max_words = int(argv[argv.index("--max-words") + 1])
    # Every record the script wrote reads (a machine with fewer packages has fewer than limit).
    written = int(re.search(r": (\d+) records", done.stdout)[1])
    assert len(records) == written <= limit
    assert records["id"].is_unique
    # Grouped by source package; prompts no longer than the page's bound (in words).
    assert records["group"].notna().all()
    prompts = [json.loads(m)[0]["content"] for m in records["messages"]]
    assert max(len(p.split()) for p in prompts) <= max_words
