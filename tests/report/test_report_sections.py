"""The report's sections and pages on small hand-made files: the sentences carry the files'
numbers, the budget section recommends what the plans table marks, tables are formatted for a
reader, text is escaped, and a missing or garbled file is one error naming it."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from campaign.budget.section import budget_section, forecast_section, split_verdict
from campaign.core.errors import CampaignError
from campaign.core.io import read_json, read_table
from campaign.core.stage import Section
from campaign.data.section import data_section, leakage_section
from campaign.evaluate import decisions_from_dict
from campaign.evaluate.section import decisions_section
from campaign.preflight.section import preflight_section
from campaign.report.sections import verdict_section
from campaign.report.stage import cell_text, render_html, render_markdown


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def test_data_section_lists_the_artifacts_that_hold_findings(tmp_path):
    manifest = tmp_path / "manifest.parquet"
    pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "source": ["x.jsonl", "x.jsonl", "y.csv"],
            "licence": ["CC0-1.0", "CC0-1.0", "MIT"],
            "label": ["p", "q", "p"],
        }
    ).to_parquet(manifest)
    kinds = {"api_key": {"records": 1, "findings": 2}, "email": {"records": 0, "findings": 0}}
    privacy = write_json(
        tmp_path / "privacy.json", {"kinds": kinds, "n_flagged": 1, "n_records": 3}
    )
    vocab = "results/runs/r1/model/tokenizer.json"
    scan = {
        "scanned": 5,
        "flagged": 1,
        "findings_by_kind": {"api_key": 1},
        "artifacts": [{"path": vocab, "artifact": "model", "findings": {"api_key": 1}}],
    }
    section = data_section(manifest, privacy, write_json(tmp_path / "scan.json", scan))
    text = " ".join(section.lines)
    assert "Licence per source: x.jsonl: CC0-1.0; y.csv: MIT." in text
    assert "1 of 3 records flagged (api_key 1)" in text
    assert "1 of 5 artifacts hold findings (api_key 1)." in text
    title, table = section.tables[-1]
    assert title == "Findings in the campaign's artifacts"
    assert table.to_dict("records") == [
        {"artifact": "model", "path": vocab, "findings": "api_key 1"}
    ]
    # No artifact with findings: the sentence says so, and there is no table of them.
    clean = {**scan, "flagged": 0, "findings_by_kind": {}, "artifacts": []}
    section = data_section(manifest, privacy, write_json(tmp_path / "clean.json", clean))
    assert "0 of 5 artifacts hold findings." in " ".join(section.lines)
    assert [t for t, _ in section.tables] == ["Records per source", "Privacy findings per kind"]
    with pytest.raises(CampaignError, match="scan.json"):
        data_section(manifest, privacy, write_json(tmp_path / "scan.json", {"scanned": 5}))


def test_data_section_names_the_records_that_spell_a_special_token(tmp_path):
    """The tokenizer is known from the preflight on: its tokenization check's whole-data scan
    (data/control_tokens.py) is the data section's line and table, per record and field."""
    manifest = tmp_path / "manifest.parquet"
    pd.DataFrame(
        {"id": ["a", "b"], "source": ["chat.jsonl"] * 2, "licence": ["MIT"] * 2, "label": "x"}
    ).to_parquet(manifest)
    privacy = write_json(tmp_path / "privacy.json", {"kinds": {}, "n_flagged": 0, "n_records": 2})
    shown = {"record": "chat.jsonl record b", "field": "messages[1].content"}
    found = {
        "policy": "keep",
        "records_checked": 2,
        "records": 1,
        "fields": 1,
        "per_token": {"<|endoftext|>": 1},
        "shown": [{**shown, "token": "<|endoftext|>"}],
    }
    report = {"tokenization": {"passed": True, "details": {"special_tokens": found}}}
    section = data_section(manifest, privacy, None, write_json(tmp_path / "pre.json", report))
    assert (
        "1 of 2 records spell special tokens ('<|endoftext|>' 1); data.special_tokens: keep "
        "(they act as control tokens); first: chat.jsonl record b field messages[1].content."
    ) in section.lines
    title, table = section.tables[-1]
    assert title == "Records that spell a special token (first ones)"
    assert table.to_dict("records") == [{**shown, "token": "<|endoftext|>"}]
    clean = {**found, "records": 0, "fields": 0, "per_token": {}, "shown": []}
    report["tokenization"]["details"]["special_tokens"] = clean
    section = data_section(manifest, privacy, None, write_json(tmp_path / "pre.json", report))
    assert "No record spells a special token of the tokenizer" in " ".join(section.lines)


def test_leakage_section_contrasts_the_split_with_the_naive_one(tmp_path):
    leaks = {
        "groups_in_several_splits": 0,
        "cross_split_group_pairs": 0,
        "cross_split_exact_pairs": 1,
        "cross_split_near_pairs": 0,
        "eval_records_with_train_partner": 1,
        "leaking_pairs": 1,
    }
    naive = dict.fromkeys(leaks, 0) | {"leaking_pairs": 250, "eval_records_with_train_partner": 40}
    audit = {
        "leaks": leaks,
        "naive_split": {"leaks": naive, "what": "per-record uniform split"},
        "splits": {"train": {"records": 8, "units": 4, "share": 0.8, "target": 0.8}},
        "method": "group_hash",
        "records": 10,
        "units": 5,
    }
    section = leakage_section(write_json(tmp_path / "audit.json", audit))
    assert "1 with this split" in section.lines[1]
    assert "would have leaked 250 pairs" in section.lines[1]
    assert "40 evaluation records" in section.lines[1]
    table = section.tables[0][1].set_index("what")
    assert table.loc["leaking pairs, total"].tolist() == [1, 250]
    # Without a recorded naive split, the page says so instead of inventing zeros.
    del audit["naive_split"]
    section = leakage_section(write_json(tmp_path / "audit.json", audit))
    assert "no naive split was recorded" in section.lines[1]


def test_preflight_section_names_failed_checks_and_small_cards(tmp_path):
    report = {
        "passed": False,
        "memory": {
            "passed": True,
            "blocking": True,
            "details": {
                "fit_table": [
                    {"card": "T4", "fits": False, "need_bytes": 2, "usable_bytes": 1},
                    {"card": "A100", "fits": True, "need_bytes": 2, "usable_bytes": 9},
                ]
            },
        },
        "overfit": {"passed": False, "blocking": True, "details": {}},
    }
    section = preflight_section(write_json(tmp_path / "report.json", report))
    assert section.lines[0] == "Preflight FAILED: 1 of 2 checks passed; failed: overfit."
    assert section.lines[1] == "Memory fit: the run fits 1 of 2 target card(s) (T4 too small)."


def plans_table(rest_runs: int) -> pd.DataFrame:
    rows = [
        ("rest", "box", "hourly", rest_runs, 12.0, 6.0, True, rest_runs > 0),
        ("rest", "cloud", "3-day package x1", rest_runs, 50.0, 1.0, False, False),
        ("kept plan", "box", "hourly", 4, 24.0, 12.0, True, rest_runs == 0),
    ]
    columns = ["scenario", "offer", "pricing", "runs", "cost", "wall_hours", "meets_deadline",
               "cheapest"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns).assign(currency="EUR")


@pytest.mark.parametrize("rest_runs", [2, 0])
def test_budget_section_recommends_the_cheapest_way_for_what_is_left(tmp_path, rest_runs):
    plans_table(rest_runs).to_parquet(tmp_path / "plans.parquet")
    jobs = pd.DataFrame({"run": ["a", "b"], "wall_hours": [1.0, 2.0], "cost": [2.0, 4.0]})
    jobs.to_parquet(tmp_path / "jobs.parquet")
    (tmp_path / "summary.txt").write_text("Budget in EUR.\n")
    section = budget_section(
        tmp_path / "plans.parquet", tmp_path / "jobs.parquet", tmp_path / "summary.txt"
    )
    assert section.lines[0] == "2 finished job(s), 3 h, 6.00 EUR measured."
    if rest_runs:  # runs are left: the rest is what to buy
        assert section.lines[1] == "Recommended offer (rest): box, hourly: 12.00 EUR, done in 6 h."
        assert len(section.figure[1][0]) == 2
    else:  # nothing left: the whole kept plan again, as the budget stage does
        assert section.lines[1].startswith("Recommended offer (kept plan): box, hourly: 24.00")
    assert section.pre == "Budget in EUR.\n"


def test_forecast_section_reports_the_median_errors(tmp_path):
    forecast = pd.DataFrame(
        {"run": ["a", "b", "c"], "finished": [True, True, False],
         "projected_hours": [1.0, 1.0, 1.0], "actual_hours": [2.0, 2.0, None],
         "forecast_from_earlier_hours": [None, 2.2, 2.1], "forecast_hours": [2.0, 2.0, 2.1],
         "abs_error_projected": [0.5, 0.5, None], "abs_error_calibrated": [None, 0.1, None]}
    )  # fmt: skip
    forecast.to_parquet(tmp_path / "forecast.parquet")
    section = forecast_section(tmp_path / "forecast.parquet")
    assert section.lines == [
        "2 of 3 planned run(s) finished.",
        "Median absolute forecast error, as projected: 50% (over 2 run(s)).",
        "Median absolute forecast error, calibrated: 10% (over 1 run(s)).",
    ]


def test_decisions_section_opens_with_the_verdict_and_the_held_out_number(tmp_path):
    # Chosen on validation (90.0 %, the maximum of the cell means: optimistic); the headline is
    # the test number (85.0 %), which did not take part in the choice.
    verdict = "Keep: train.lr=0.001 — chosen on validation; test accuracy 85.0 % [80.0, 89.0]"
    decisions = {
        "decide_on": "validation",
        "metric": "accuracy",
        "verdict": {"line": verdict},
        "lines": [verdict, "", "Decisions use the validation split."],
        "best_cell": {
            "cell": "train.lr=0.001",
            "value": 0.9,
            "ci_low": 0.86,
            "ci_high": 0.93,
            "chosen_on": "validation",
            "reported_on": "test",
            "reported": {"value": 0.85, "ci_low": 0.8, "ci_high": 0.89},
            "runs": ["run-a", "run-b"],
        },
        "decisions": [],
    }
    lines = decisions_section(decisions_from_dict(decisions)).lines
    assert lines[0] == verdict
    best = next(line for line in lines if line.startswith("Best cell"))
    assert "test accuracy 85.0 % [80.0, 89.0]" in best
    assert "chosen on validation" in best and "90.0" not in best
    # Without a held-out number (an older decisions.json) the line says where it was chosen.
    del decisions["best_cell"]["reported"]
    lines = decisions_section(decisions_from_dict(decisions)).lines
    best = next(line for line in lines if line.startswith("Best cell"))
    assert "validation accuracy 90.0 % [86.0, 93.0]" in best and "chosen on it: optimistic" in best


def test_bad_files_are_one_error_naming_the_file(tmp_path):
    with pytest.raises(CampaignError, match=r"missing\.json: file not found"):
        read_json(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CampaignError, match=r"bad\.json: not valid JSON"):
        read_json(tmp_path / "bad.json")
    write_json(tmp_path / "audit.json", {"leaks": {}})
    with pytest.raises(CampaignError, match=r"audit\.json: expected a key 'splits'"):
        leakage_section(tmp_path / "audit.json")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(CampaignError, match=r"bad\.parquet: not a readable Parquet table"):
        read_table(tmp_path / "bad.parquet", ("run",))
    pd.DataFrame({"run": ["a"]}).to_parquet(tmp_path / "plans.parquet")
    with pytest.raises(CampaignError, match=r"plans\.parquet: expected a column 'scenario'"):
        budget_section(tmp_path / "plans.parquet", tmp_path / "j", tmp_path / "s")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (float("nan"), "-"),
        (True, "yes"),
        (0.123456, "0.1235"),
        (1234.5678, "1,235"),
        (0.00012, "0.00012"),
        (3000, "3000"),
        (1_234_567, "1,234,567"),
        ("run-a", "run-a"),
    ],
)
def test_table_cells_are_formatted_for_a_reader(value, text):
    assert cell_text(value) == text


def test_pages_escape_text_and_keep_every_section():
    sections = [
        Section(
            ["<b>3</b> records"], [("T", pd.DataFrame({"a|b": [1]}))], key="data", title="Data"
        ),
        Section(["keep x"], key="decisions", title="Decisions"),
    ]
    html = render_html("Report", sections, {"data": b"\x89PNG"})
    assert "&lt;b&gt;3&lt;/b&gt; records" in html and "<b>3</b>" not in html
    assert html.count("<h2>") == 2 and 'src="data:image/png;base64,iVBORw==' in html
    md = render_markdown("Report", sections, {"data": "figures/data.png"})
    assert "## Data" in md and "## Decisions" in md
    assert "![Data](figures/data.png)" in md and "| a\\|b |" in md


def test_the_verdict_opens_the_report_with_the_budgets_block_and_every_finding(tmp_path):
    block = [
        "Verdict (chosen on validation; quality on test, accuracy; levels in %, differences in "
        "points)",
        "  Keep: the reference floor floor/tfidf: test accuracy 90.6 % [87.1, 93.5]",
        "  Cost: 0.20 EUR to train + 0.20 EUR to serve 360,000 predictions = 0.40 EUR (offer a)",
        "  Act on: evaluation: lr=1 below floor",
    ]
    summary = tmp_path / "summary.txt"
    summary.write_text("\n".join([*block, "", "Keep the reference floor floor/tfidf: ..."]) + "\n")
    findings = ["privacy: 2 of 10 records hold findings (email 2)", "evaluation: lr=1 below floor"]
    section = verdict_section(summary, {"decide_on": "validation", "metric": "accuracy"}, findings)
    assert section.lines == [
        "Chosen on validation; quality on test, accuracy; levels in %, differences in points.",
        "Keep: the reference floor floor/tfidf: test accuracy 90.6 % [87.1, 93.5]",
        "Cost: 0.20 EUR to train + 0.20 EUR to serve 360,000 predictions = 0.40 EUR (offer a)",
        "Act on: privacy: 2 of 10 records hold findings (email 2)",
        "Act on: evaluation: lr=1 below floor",
    ]
    # As the report shows it: with the key and title its declaration gives (campaign.report).
    page = render_html("t", [dataclasses.replace(section, key="verdict", title="Verdict")], {})
    assert (
        "<li>Keep: the reference floor floor/tfidf: test accuracy 90.6 % [87.1, 93.5]</li>" in page
    )
    # The budget section shows the rest of the summary, not the block a second time.
    assert split_verdict(summary.read_text()) == (
        block,
        "Keep the reference floor floor/tfidf: ...\n",
    )


def test_markdown_shows_markup_from_the_data_as_text():
    """A label, id or file name from the data carries markup: summary.md escapes it as the HTML
    page does (it did not: a link or a tag in a label became one). Rendered by a CommonMark
    renderer, nothing from the data becomes a tag, link, image, emphasis or code; the numbers'
    intervals stay as they are."""
    markdown_it = pytest.importorskip("markdown_it")
    evil = (
        "label <script>alert(1)</script> [click](http://x.example) ![i](http://x.example/p.png) "
        "**bold** _em_ `code` ~~gone~~ &lt; <http://x.example>"
    )
    sections = [
        Section(
            [evil, "# not a heading", "1. not a list", "accuracy 90.6 % [87.1, 93.5], p < 0.05"],
            [("Labels of " + evil, pd.DataFrame({"label": [evil, "a|b"], "n": [1, 2]}))],
            pre="text ``` that tries to end the block\n" + evil,
            key="data",
            title="Data",
        )
    ]
    md = render_markdown("Report of " + evil, sections, {})
    assert "- accuracy 90.6 % [87.1, 93.5], p < 0.05" in md  # plain text stays readable
    page = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)
    for tag in ("<script", "<a ", "<img", "<em>", "<s>", "<del>", "<ol", "<h1>not"):
        assert tag not in page, tag
    assert page.count("<strong>") == 1  # the table's caption, bold by the report itself
    assert page.count("<code>") == 1 and page.count("<pre>") == 1  # the fenced block only
    assert page.count("<h1>") == 1 and page.count("<h2>") == 1 and page.count("<table>") == 1
    # the title, the line, the caption, the cell and the preformatted block
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 5
    assert "<td>a|b</td>" in page


def test_a_long_text_is_cut_in_every_report_cell_with_its_full_length():
    """A 10,000-character prediction was shown whole in every cell of both pages: a cell shows
    the text's start and its full length, still escaped; the full text stays in the table the
    section was given (the evaluation's errors/samples.parquet holds it too)."""
    long = "<b>answer</b> " + "x" * 9_970 + "<script>tail</script>"
    assert len(long) == 10_005
    frame = pd.DataFrame({"id": ["a"], "prediction": [long], "score": [0.5]})
    sections = [Section(["s"], [("Samples", frame)], key="samples", title="Samples")]
    html = render_html("Report", sections, {})
    md = render_markdown("Report", sections, {})
    for page in (html, md):
        assert "… (10,005 characters)" in page
        assert "x" * 1_000 not in page and "tail" not in page
    assert "<td>&lt;b&gt;answer&lt;/b&gt; xxx" in html and "<b>answer" not in html
    assert "| a | \\<b>answer\\</b> xxx" in md
    assert frame["prediction"][0] == long
    short = "y" * 200
    assert cell_text(short) == short
