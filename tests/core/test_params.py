"""params.yaml against the schema: valid as shipped, and one-line errors naming the key."""

import copy

import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.core.params import load_params, validate


@pytest.fixture(scope="module")
def params():
    # A from_config campaign (the tests' tiny one): the default params.yaml fine-tunes a
    # pretrained folder, which has no model.config to vary or break.
    return load_params("tests/fixtures/tiny_params.yaml")


def error_for(params, mutate) -> str:
    bad = copy.deepcopy(params)
    mutate(bad)
    with pytest.raises(CampaignError) as info:
        validate(bad)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_shipped_params_are_valid():
    shipped = load_params("params.yaml")
    assert shipped["campaign"]["name"] == "demo"
    assert shipped["model"]["source"] != "from_config" and "config" not in shipped["model"]


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (
            lambda p: p["ablation"]["factors"]["train"].update(lr=0.001),
            "ablation.factors.train.lr: expected a list of numbers; got number 0.001",
        ),
        (
            lambda p: p["ablation"]["factors"]["train"].update(lr=["1e-4"]),
            "ablation.factors.train.lr[0]: expected a number; got string '1e-4' (YAML reads",
        ),
        (
            lambda p: p["train"].update(lr="0.001"),
            "train.lr: expected a number; got string '0.001' (a number in quotes is text: "
            "write 0.001 without the quotes)",
        ),
        (
            lambda p: p["train"].update(lr="5e-4"),
            "train.lr: expected a number; got string '5e-4' (YAML reads an exponent without a "
            "decimal point and a sign as text: write 5.0e-4)",
        ),
        (lambda p: p["train"].update(lrr=0.1), "train.lrr: unknown key"),
        (lambda p: p["train"].update(lrr=0.1), "did you mean 'lr'?"),
        (lambda p: p["train"].pop("max_steps"), "train.max_steps: missing required key"),
        (
            lambda p: p["train"].update(precision="fp8"),
            "train.precision: expected one of fp32, bf16, fp16; got string 'fp8'",
        ),
        (lambda p: p["train"].update(micro_batch=0), "train.micro_batch: must be >= 1; got 0"),
        (lambda p: p["train"].update(lr=-1.0), "train.lr: must be > 0; got -1.0"),
        (
            lambda p: p["data"]["sources"][0].pop("licence"),
            "data.sources[0].licence: missing required key",
        ),
        (
            lambda p: p["data"]["sources"][0].update(format="xlsx"),
            "data.sources[0].format: expected one of csv, jsonl, parquet",
        ),
        (lambda p: p["data"].update(sources=[]), "data.sources: must list at least 1 item"),
        (lambda p: p["ablation"].update(seeds=[1, 1]), "ablation.seeds: values must be unique"),
        (
            lambda p: p["ablation"]["factors"].update(model={"config": {"vocab": [1]}}),
            "ablation.factors.model.config.vocab: unknown key",
        ),
        (
            lambda p: p["ablation"]["factors"].update(optimizer={"name": ["adam"]}),
            "ablation.factors.optimizer: unknown key",
        ),
        (lambda p: p.update(extra={}), "extra: unknown key"),
        (lambda p: p["campaign"].update(name="my campaign"), "campaign.name: must match"),
    ],
)
def test_bad_params_name_the_key(params, mutate, expected):
    assert expected in error_for(params, mutate)


def test_model_factors_need_a_model_built_from_config(params):
    def mutate(p):
        p["model"]["source"] = "models/minilm"
        p["model"]["tokenizer"] = {"source": "model"}
        p["ablation"]["factors"]["model"] = {"config": {"hidden_size": [32, 64]}}

    assert (
        "ablation.factors.model: model.config can only be varied when model.source is "
        "from_config" in error_for(params, mutate)
    )


def test_from_config_model_needs_every_config_key(params):
    message = error_for(params, lambda p: p["model"]["config"].pop("hidden_size"))
    assert "model.config.hidden_size: missing" in message


def test_model_config_is_required_only_for_a_model_built_from_config(params):
    def from_config_without_config(p):
        p["model"]["source"] = "from_config"
        p["model"]["tokenizer"] = {"source": "train_split", "vocab_size": 100}
        p["model"]["tokenizer"].update(min_frequency=1, lowercase=True)
        p["model"].pop("config", None)

    assert error_for(params, from_config_without_config) == (
        "params: model.config: required when model.source is from_config"
    )
    pretrained = copy.deepcopy(params)
    pretrained["model"] = {
        "task": "sequence_classification",
        "source": "models/any-checkpoint",  # not read by validation: Snakemake checks it exists
        "tokenizer": {"source": "model"},
    }
    pretrained["ablation"]["factors"].pop("model", None)
    assert validate(pretrained)["model"] == pretrained["model"]
    # and a pretrained source with the tokenizer of the train split is refused, saying why
    pretrained["model"]["tokenizer"]["source"] = "train_split"
    with pytest.raises(CampaignError, match="model.tokenizer.source: a pretrained model keeps"):
        validate(pretrained)


def test_params_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(CampaignError, match="nope.yaml: params file not found"):
        load_params(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: [1, 2\n")
    with pytest.raises(CampaignError, match=r"broken.yaml line \d+: not valid YAML"):
        load_params(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(CampaignError, match="scalar.yaml: expected a mapping of sections"):
        load_params(scalar)


def test_every_schema_section_is_in_params(params):
    schema = yaml.safe_load(open("workflow/schemas/params.schema.yaml"))
    assert set(schema["required"]) == set(params)


@pytest.mark.parametrize(
    ("line", "replacement", "key"),
    [
        ("  lr: 1.0e-3", "  lr: .nan", "train.lr"),
        ("      lr: [1.0e-3, 3.0e-3]", "      lr: [1.0e-3, .NaN]", "ablation.factors.train.lr[1]"),
        ("  confidence: 0.95", "  confidence: .nan", "evaluation.confidence"),
        ("  max_quality_loss: 0.01", "  max_quality_loss: .nan", "evaluation.max_quality_loss"),
        ("hourly: 0.05,", "hourly: .inf,", "budget.offers[0].hourly"),
        ("  lr: 1.0e-3", "  lr: -.inf", "train.lr"),
    ],
)
def test_nan_and_infinity_are_refused_in_every_numeric_key(tmp_path, line, replacement, key):
    """`.nan` passes every JSON Schema bound (each comparison with NaN is false), so a NaN rate
    used to fail a training job late, and a NaN confidence crashed evaluate after all training."""
    text = open("tests/fixtures/tiny_params.yaml", encoding="utf-8").read()
    assert line in text
    path = tmp_path / "params.yaml"
    path.write_text(text.replace(line, replacement, 1), encoding="utf-8")
    with pytest.raises(CampaignError) as info:
        load_params(path)
    word = "an infinity" if "inf" in replacement else "NaN"
    assert str(info.value) == f"{path}: {key}: expected a finite number; got {word}"


def test_validate_command_refuses_nan(tmp_path, capsys):
    from campaign.cli import main

    text = open("tests/fixtures/tiny_params.yaml", encoding="utf-8").read()
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("  confidence: 0.95", "  confidence: .nan", 1), encoding="utf-8")
    assert main(["validate", "--params", str(path)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.endswith("evaluation.confidence: expected a finite number; got NaN"), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "written, hint",
    [
        (
            "1e5",
            "(YAML reads an exponent without a decimal point and a sign as text: write 1.0e+5)",
        ),
        (
            "1.0e5",
            "(YAML reads an exponent without a decimal point and a sign as text: write 1.0e+5)",
        ),  # fmt: skip
        (
            '"3e-4"',
            "(a number in quotes is text, and YAML reads an exponent without a decimal "
            "point and a sign as text: write 3.0e-4 without the quotes)",
        ),  # fmt: skip
        ("'0.001'", "(a number in quotes is text: write 0.001 without the quotes)"),
    ],
)
def test_a_number_read_as_text_is_given_the_form_yaml_reads_as_a_number(tmp_path, written, hint):
    """The hint's suggestion, written back, must read as that number: PyYAML (YAML 1.1) reads
    1e5 and 1.0e5 as text, and quotes are named only when the value had them."""
    text = open("tests/fixtures/tiny_params.yaml", encoding="utf-8").read()
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("  lr: 1.0e-3", f"  lr: {written}", 1), encoding="utf-8")
    with pytest.raises(CampaignError) as info:
        load_params(path)
    assert str(info.value).endswith(hint), str(info.value)
    suggested = hint.split("write ")[1].split()[0].rstrip(")")
    assert yaml.safe_load(f"lr: {suggested}")["lr"] == float(written.strip("'\""))


def test_a_factor_on_the_generation_metric_is_refused_saying_it_rescores_only(params):
    """model.generation.metric is in no run id (the evaluation scores the generated text): a
    factor over it would train the same runs under two cells. One line names the key and says
    what changing the metric does instead, in the factors and in an explicit cell."""

    def generation(p):
        p["model"]["task"] = "generation"
        p["model"]["generation"] = {"metric": "token_f1"}

    def factor(p):
        generation(p)
        p["ablation"]["factors"]["model"] = {"generation": {"metric": ["token_f1", "exact_match"]}}

    message = error_for(params, factor)
    assert message.startswith("params: ablation.factors.model.generation.metric: ")
    assert "rescores only" in message and "identical runs" in message

    def cell(p):
        generation(p)
        p["ablation"]["design"] = "explicit"
        p["ablation"]["explicit"]["cells"] = [
            {"train.lr": 0.001, "model.generation.metric": "exact_match"}
        ]

    message = error_for(params, cell)
    assert "ablation.explicit.cells[0].model.generation.metric: " in message
    assert "rescores only" in message


@pytest.mark.parametrize(
    ("rule", "value", "said"),
    [
        ({"minimum": 1}, 0, "x: must be >= 1; got 0"),
        ({"exclusiveMinimum": 1}, 1, "x: must be > 1; got 1"),
        ({"maximum": 1}, 2, "x: must be <= 1; got 2"),
        ({"exclusiveMaximum": 1}, 1.0, "x: must be < 1; got 1.0"),
        ({"minItems": 2}, [1], "x: must list at least 2 item(s)"),
        ({"uniqueItems": True}, [1, 1], "x: values must be unique; got [1, 1]"),
        ({"minLength": 1}, "", "x: must not be empty"),
        ({"pattern": "^a"}, "b", "x: must match ^a; got string 'b'"),
    ],
)
def test_a_value_outside_its_rule_is_one_line_naming_the_key_and_the_rule(rule, value, said):
    import jsonschema

    from campaign.core.params import format_error

    (error,) = jsonschema.Draft7Validator({"properties": {"x": rule}}).iter_errors({"x": value})
    assert format_error(error) == said
