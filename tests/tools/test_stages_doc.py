"""docs/stages.md is the stage registry, rendered: each stage's rule, the function its job runs,
its inputs with their paths, its outputs and the params it reads; the page is up to date."""

from __future__ import annotations

from campaign.core.registry import stages
from campaign.tools import stages_doc


def test_page_is_up_to_date():
    assert stages_doc.main(["--check"]) == 0, "run `python -m campaign.tools.stages_doc`"


def test_every_stage_names_its_rule_and_function():
    rules = stages_doc.rules_of()
    page = stages_doc.render(stages_doc.load_params())
    for name, stage in stages().items():
        assert name in rules, f"stage {name}: no rule runs stage_shell({name!r})"
        rule_file, _, rule = rules[name]
        block = page.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert f"{rule}` in `{rule_file}`" in block
        assert f"`{stage.entry}`" in block
        for output in stage.outputs.values():
            assert f"`{output.path}`" in block


def test_rules_are_found_inside_blocks(tmp_path):
    """A rule indented under an `if` (the adaptive looks' checkpoint) is found, and a stage_shell
    line belongs to the rule above it."""
    (tmp_path / "x.smk").write_text(
        'rule a:\n    shell:\n        stage_shell("one")\n\n'
        'if X:\n\n    checkpoint b:\n        shell:\n            stage_shell("two")\n'
    )
    assert stages_doc.rules_of(tmp_path) == {
        "one": ("workflow/rules/x.smk", "rule", "a"),
        "two": ("workflow/rules/x.smk", "checkpoint", "b"),
    }
