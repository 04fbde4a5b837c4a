"""docs/registries.md is the registries, rendered: every variant, preflight check, design, task,
metric and floor the params accept is on the page, and the page is up to date."""

from __future__ import annotations

from campaign.core.tasks import LABEL_FLOORS, TASKS
from campaign.plan import designs
from campaign.preflight import checks
from campaign.quantize import variants
from campaign.tasks.generation.text_scores import METRICS
from campaign.tools import registries_doc


def test_page_is_up_to_date():
    assert registries_doc.main(["--check"]) == 0, "run `python -m campaign.tools.registries_doc`"


def test_every_registered_name_is_on_the_page():
    page = registries_doc.render()
    names = [
        *variants.names(),
        *checks.names(),
        *designs.names(),
        *TASKS,
        "sequence_classification",
        "causal_lm",
        *METRICS,
        *LABEL_FLOORS,
        *(floor for task in TASKS.values() for floor in task.floors),
    ]
    assert [n for n in names if f"`{n}`" not in page] == []
    assert "`kv_corrupt`" in page and "canary" in page
