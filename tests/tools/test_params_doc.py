"""docs/params.md is the schema, rendered: every key documented, the page up to date, the order
that of params.yaml, and types, ranges and required-ness read off the schema as written."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.tools import params_doc

TINY_SCHEMA = textwrap.dedent(
    """
    description: the tiny campaign
    type: object
    required: [train, data]
    properties:
      data:
        description: the text
        type: object
        required: [sources]
        properties:
          sources:
            description: files to read
            type: array
            minItems: 1
            items:
              type: object
              required: [format]
              properties:
                format: {enum: [csv, jsonl], description: how it is read}
                licence: {type: [string, "null"], minLength: 1, description: its licence}
      train:
        description: the recipe
        type: object
        required: [lr]
        properties:
          steps: {type: integer, minimum: 1, description: optimizer steps}
          lr: {type: number, exclusiveMinimum: 0, maximum: 1, description: peak rate}
          checks:
            type: array
            uniqueItems: true
            items: {x-registry: campaign.preflight.checks}
            description: which checks
    """
)


def _schema() -> dict:
    return yaml.safe_load(TINY_SCHEMA)


def test_every_key_of_the_schema_has_a_description():
    schema = yaml.safe_load(params_doc.SCHEMA_PATH.read_text(encoding="utf-8"))
    assert params_doc.undocumented(schema) == [], (
        "give these keys a `description:` in workflow/schemas/params.schema.yaml"
    )


def test_docs_params_md_is_up_to_date_with_the_schema():
    current = params_doc.DOC_PATH.read_text(encoding="utf-8")
    assert current == params_doc.build(), (
        "docs/params.md is out of date: run `python -m campaign.tools.params_doc`"
    )


def test_keys_follow_params_yaml_order_with_types_ranges_and_required():
    # params.yaml writes train before data (the schema the other way round): sections follow
    # params.yaml; keys inside a section follow the schema, whatever order params.yaml has.
    page = params_doc.render(_schema(), {"train": {"lr": 0.1, "steps": 5}, "data": {}})
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `train.steps` | integer | ≥ 1 | no | optimizer steps |",
        "| `train.lr` | number | > 0, ≤ 1 | yes | peak rate |",
        "| `train.checks` | list of string | no repeats, each: a module name in "
        "`workflow/campaign/preflight/checks/` | no | which checks |",
        "| `data.sources` | list of mapping | at least 1 item | yes | files to read |",
        "| `data.sources[].format` | string | `csv`, `jsonl` | yes | how it is read |",
        "| `data.sources[].licence` | string or null | non-empty | no | its licence |",
    ]
    assert page.index("## `train`") < page.index("## `data`")
    assert "\nthe recipe\n" in page


def test_an_undocumented_key_is_named_even_inside_a_list(tmp_path):
    schema = _schema()
    item = schema["properties"]["data"]["properties"]["sources"]["items"]
    del item["properties"]["format"]["description"]
    assert params_doc.undocumented(schema) == ["data.sources[].format"]
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(schema), encoding="utf-8")
    with pytest.raises(
        CampaignError, match=r"schema\.yaml: no description for data\.sources\[\]\.format$"
    ):
        params_doc.build(path, tmp_path / "no-params.yaml")


def test_check_fails_on_a_stale_page_and_leaves_it_alone(tmp_path, capsys):
    page = tmp_path / "params.md"
    page.write_text("# an old page\n", encoding="utf-8")
    assert params_doc.main(["--check", "--out", str(page)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "out of date" in err[0] and "campaign.tools.params_doc" in err[0]
    assert page.read_text(encoding="utf-8") == "# an old page\n"
    assert params_doc.main(["--out", str(page)]) == 0
    assert params_doc.main(["--check", "--out", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == params_doc.DOC_PATH.read_text(encoding="utf-8")


def test_the_schemas_optional_train_keys_are_the_defaults_table():
    """A `train` key a params file may leave out has its default in one table
    (core/defaults.py), which the recipe, the run ids and this page read: a key added to the
    schema as optional without a default there (or the reverse) fails here."""
    from campaign.core.defaults import TRAIN_DEFAULTS

    train = yaml.safe_load(params_doc.SCHEMA_PATH.read_text())["properties"]["train"]
    optional = set(train["properties"]) - set(train["required"])
    assert optional == set(TRAIN_DEFAULTS)
    page = (params_doc.SCHEMA_PATH.parents[2] / "docs" / "params.md").read_text()
    assert "| `train.devices` | integer | ≥ 1 | no |" in page
    assert page.count("Absent: 1 |") >= 1 and "Absent: true |" in page
