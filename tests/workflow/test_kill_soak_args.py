"""scripts/kill_soak.py's arguments and closing tally (the soak itself is slow, outside CI): a
scenario plan a person types is read as meant or refused in one line, and the tally says MISSED
where the issue's goals (30 kills, 8 of them in the SLURM profile) are not met."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import yaml

from conftest import REPO, campaign


@pytest.fixture(scope="module")
def soak():
    spec = importlib.util.spec_from_file_location("kill_soak", REPO / "scripts" / "kill_soak.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_a_plan_gives_each_scenario_its_kills_in_the_order_given(soak):
    args = soak.parse_args(["--scenarios", "slurm:9,workstation,shared:12", "--kills", "4"])
    assert list(args.plan.items()) == [("slurm", 9), ("workstation", 4), ("shared", 12)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workstation,cloud", "--scenarios: unknown scenario 'cloud' (known: workstation, "),
        ("slurm:0", "--scenarios: 'slurm:0': expected slurm:N with N >= 1"),
        ("slurm:x", "--scenarios: 'slurm:x': expected slurm:N with N >= 1"),
        ("slurm,slurm:3", "--scenarios: slurm given twice"),
        (",", "--scenarios: name at least one of workstation, slurm, shared"),
    ],
)
def test_a_bad_plan_is_refused_in_one_line(soak, text, message):
    with pytest.raises(SystemExit) as e:
        soak.parse_args(["--scenarios", text])
    assert str(e.value).startswith(message)


def test_a_span_not_above_the_least_delay_is_refused(soak, capsys):
    with pytest.raises(SystemExit):
        soak.parse_args(["--span", "5", "--min-delay", "5"])
    assert "--span 5.0 must be above --min-delay 5.0" in capsys.readouterr().err


def test_the_tally_totals_the_scenarios_and_says_what_was_missed(soak):
    ws = soak.Tally("workstation", kills=12, campaigns=4, identical=4, files=288)
    slurm = soak.Tally("slurm", kills=7, campaigns=2, identical=1, files=144)
    slurm.differing.append("slurm/project2: results/evaluate/metrics.json")
    lines = soak.render([ws, slurm], ["shared (no cluster)"])
    assert lines[2:5] == [
        "| workstation | 12 | 4 | 4 | 288 |",
        "| slurm | 7 | 2 | 1 | 144 |",
        "| total | 19 | 6 | 5 | 432 |",
    ]
    assert "DIFFERS slurm/project2: results/evaluate/metrics.json" in lines
    assert "SKIPPED shared (no cluster)" in lines
    assert "MISSED: 19 kills landed; the soak asks for at least 30" in lines
    assert "MISSED: 7 kills in the SLURM profile; the soak asks for at least 8" in lines
    # Both goals met: nothing missed.
    met = soak.render([soak.Tally("workstation", kills=22), soak.Tally("slurm", kills=8)], [])
    assert not any(line.startswith("MISSED") for line in met)


def test_the_generation_soak_trains_every_run_through_the_trl_example(soak, tmp_path):
    """`--campaign trl-generation`: a project the campaign accepts (its data written), whose
    plan trains every run by the TRL SFTTrainer example through train.command."""
    assert soak.parse_args(["--campaign", "trl-generation"]).campaign == "trl-generation"
    soak.CAMPAIGN = "trl-generation"
    try:
        project = soak.copy_project(tmp_path / "project")
    finally:
        soak.CAMPAIGN = "tiny"
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["model"]["task"] == "generation"
    assert params["train"]["command"] == "trl"
    assert params["train"]["commands"]["trl"]["argv"] == ["python", soak.TRL]
    out = campaign(project, "validate").stdout
    assert "params.yaml: ok (1 data file(s), 4 planned runs)" in out
