"""A user metric is a function a user wrote, and `campaign validate` says so before any job runs:
model.generation.metric as a dotted name must resolve to a Python function of two positional
parameters (prediction, reference) whose module is a file of the project or of an installed
package that is not the standard library. os.system, subprocess.call and shutil.rmtree were
called with (prediction, reference) by the evaluation (rmtree ran on every prediction as a path);
each is refused at validate in one line naming the key, as are builtins, classes and a module
that does not exist. A metric that raises while scoring is refused in one line naming the metric,
the item and the exception; one that returns the string "0.5" is refused like NaN.

model.chat_template naming a file outside the project, a folder or a missing file is refused at
validate and by every job that would format with it; no outside file is read."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from campaign.cli import main
from campaign.core.errors import CampaignError
from campaign.tasks.generation.text_scores import score_items

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

METRICS_PY = """
from shutil import rmtree  # a standard library function, re-exported


def starts(prediction: str, reference: str) -> float:
    return float(prediction.startswith(reference))


def as_text(prediction, reference):
    return "0.5"


def explodes(prediction, reference):
    raise ZeroDivisionError("division by zero\\n(second line)")


def three(prediction, reference, extra):
    return 1.0


class Scorer:
    def __init__(self, prediction, reference):
        pass
"""

TALKS = [
    '{"id": "q1", "messages": [{"role": "user", "content": "hi"}, '
    '{"role": "assistant", "content": "hello"}], "who": "a"}',
    '{"id": "q2", "messages": [{"role": "user", "content": "bye"}, '
    '{"role": "assistant", "content": "later"}], "who": "b"}',
]


def generation_params() -> dict:
    p = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())
    p["data"]["sources"] = [
        {"path": "data/raw/talks.jsonl", "format": "jsonl", "licence": "CC0-1.0", "origin": "x"}
    ]
    p["data"]["fields"] = {
        "id": "id", "text": None, "label": None, "messages": "messages", "group": "who",
        "timestamp": None,
    }  # fmt: skip
    p["model"] = {
        "task": "generation",
        "source": "from_config",
        "chat_template": "none",
        "generation": {"metric": "token_f1", "max_new_tokens": 10, "batch_size": 8},
        "config": {
            "architecture": "llama", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
            "max_position_embeddings": 128, "dropout": 0.0,
        },
        "tokenizer": {"source": "train_split", "vocab_size": 300, "min_frequency": 1,
                      "lowercase": False},
    }  # fmt: skip
    p["split"]["assign"] = "auto"
    p["evaluation"]["floor"] = ["retrieval"]
    p["ablation"]["factors"] = {}
    del p["evaluation"]["metric"]
    return p


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A generation project folder (the working folder, as `campaign validate` runs in it) with
    a metrics module of the user's; its module is dropped from the import cache afterwards."""
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "talks.jsonl").write_text("\n".join(TALKS) + "\n")
    (tmp_path / "mymetrics.py").write_text(METRICS_PY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop("mymetrics", None)


def validate(project: Path, capsys, **model) -> str | None:
    """`campaign validate` on the project's params with `model` keys changed: None when it
    passes, else its one-line error."""
    params = generation_params()
    for key, value in model.items():
        if key == "metric":
            params["model"]["generation"]["metric"] = value
        else:
            params["model"][key] = value
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    code = main(["validate", "--params", "params.yaml"])
    out = capsys.readouterr()
    if code == 0:
        return None
    assert code == 2 and out.err.count("\n") == 1, out.err
    return out.err.strip()


@pytest.mark.parametrize(
    ("metric", "why"),
    [
        ("os.system", "is in the standard library's os"),
        ("subprocess.call", "is in the standard library's subprocess"),
        ("shutil.rmtree", "is in the standard library's shutil"),
        ("builtins.eval", "is in the standard library's builtins"),
        ("nosuch.module.fn", "no module nosuch.module"),
        ("mymetrics.rmtree", "is the standard library's shutil.rmtree"),
        ("mymetrics.Scorer", "is a type, not a Python function"),
        ("mymetrics.three", "takes (prediction, reference, extra)"),
        ("mymetrics.missing", "cannot import it"),
        ("numpy.add", "is a ufunc, not a Python function"),
    ],
)
def test_validate_refuses_a_metric_that_is_not_a_users_function(project, capsys, metric, why):
    err = validate(project, capsys, metric=metric)
    assert err is not None and err.startswith(
        f"error: params.yaml: model.generation.metric: {metric!r}"
    )
    assert why in err


def test_validate_takes_a_users_function_and_the_built_in_metrics(project, capsys):
    assert validate(project, capsys, metric="mymetrics.starts") is None
    assert validate(project, capsys, metric="mymetrics:starts") is None
    assert validate(project, capsys, metric="token_f1") is None


def test_nothing_of_the_standard_library_is_called_while_scoring(project, tmp_path):
    """The stage's path (score_items) refuses what validate refuses before any call: rmtree
    of a prediction that names a real folder leaves it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for metric in ("shutil.rmtree", "mymetrics.rmtree", "os.system"):
        with pytest.raises(CampaignError, match=r"^model\.generation\.metric: "):
            score_items(metric, [str(victim)], ["x"])
    assert victim.is_dir()


def test_a_metric_that_raises_or_returns_text_is_refused_in_one_line(project):
    with pytest.raises(CampaignError) as raised:
        score_items("mymetrics.explodes", ["a", "b"], ["a", "b"], ids=["q1", "q2"])
    assert str(raised.value) == (
        "metric mymetrics.explodes, item q1: raised ZeroDivisionError: division by zero "
        "(second line)"
    )
    with pytest.raises(CampaignError) as text:
        score_items("mymetrics.as_text", ["a"], ["a"], ids=["q7"])
    assert (
        str(text.value)
        == "metric mymetrics.as_text, item q7: returned '0.5', not a number in [0, 1]"
    )
    assert score_items("mymetrics.starts", ["abc"], ["ab"]).tolist() == [1.0]


# ------------------------------------------------------------------ model.chat_template
def test_validate_refuses_a_template_outside_the_project_a_folder_or_a_missing_file(
    project, capsys, tmp_path_factory
):
    outside = tmp_path_factory.mktemp("elsewhere") / "secret.jinja"
    outside.write_text("SECRET FIRST LINE {{ messages }}")
    (project / "templates").mkdir()
    (project / "templates" / "link.jinja").symlink_to(outside)
    up = "../" * (len(project.parts) - 1)
    cases = {
        f"{up}etc/passwd": "lies outside the project folder",
        str(outside): "lies outside the project folder",
        "templates/link.jinja": "lies outside the project folder",
        "templates": "is not a file",
        "templates/missing.jinja": "no such file",
    }
    for setting, why in cases.items():
        err = validate(project, capsys, chat_template=setting)
        assert err == (
            f"error: params.yaml: model.chat_template: {setting}"
            + (": " if why == "no such file" else " ")
            + f"{why}; expected model, none or the path of a Jinja template file inside the "
            "project"
        )
    (project / "templates" / "chat.jinja").write_text(shutil.__name__)
    assert validate(project, capsys, chat_template="templates/chat.jinja") is None


def test_no_job_reads_a_template_outside_the_project(project, tmp_path_factory):
    """The jobs' own paths refuse it too: the derived inputs Snakemake asks for, and the
    template the run formats with (it read the file and logged its first line)."""
    from campaign.core.tasks import template_files
    from campaign.tasks.generation.chat import resolve_template

    outside = tmp_path_factory.mktemp("elsewhere") / "secret.jinja"
    outside.write_text("SECRET FIRST LINE")
    model = {"chat_template": str(outside)}
    with pytest.raises(CampaignError, match=r"^model\.chat_template: .* outside the project"):
        template_files(model, project)
    with pytest.raises(CampaignError, match=r"^model\.chat_template: .* outside the project"):
        resolve_template(str(outside), None, project)
