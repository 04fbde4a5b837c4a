"""plan_effects: each run's cell and role, and each estimable effect's contrasts as weighted cell
means, checked against effects computed by hand from made-up cell means."""

import pytest

from campaign.core.errors import CampaignError
from campaign.core.params import load_params
from campaign.plan import plan_effects, plan_runs


@pytest.fixture()
def params():
    p = load_params("params.yaml")
    p["train"].update(lr=1.0e-3, max_length=64, warmup_steps=10, weight_decay=0.0)
    p["train"]["max_grad_norm"] = 1.0
    p["ablation"].update(design="full", seeds=[1, 2], max_runs=1000)
    p["ablation"]["factors"] = {"train": {"lr": [1.0e-3, 3.0e-3], "max_length": [64, 32]}}
    return p


def estimate(contrast, metric):
    return sum(
        w["weight"] * sum(metric[r] for r in w["runs"]) / len(w["runs"])
        for w in contrast["weights"]
    )


def by_term(effects):
    return {tuple(e["term"]): e for e in effects["effects"]}


def metric_of(effects, formula):
    """A metric per run from its levels (the same at every seed, so estimates are exact)."""
    return {rid: formula(run["levels"]) for rid, run in effects["runs"].items()}


def test_full_factorial_contrasts_recover_a_known_model(params):
    out = plan_effects(params)
    assert out["factors"] == ["train.lr", "train.max_length"]
    assert out["control"] == {"train.lr": 1.0e-3, "train.max_length": 64}
    roles = [(r["role"], r["moved"], r["seed"]) for r in out["runs"].values()]
    assert roles[0] == ("control", [], 1)
    assert roles.count(("control", [], 2)) == 1
    assert sum(r["role"] == "control" for r in out["runs"].values()) == 2

    # y = 10 + 2·[lr moved] + 3·[max_length moved] + 5·[both]: lr's main effect averaged over
    # max_length is 2 + 5/2, max_length's 3 + 5/2, the interaction 5.
    def y(lv):
        a, b = lv["train.lr"] == 3.0e-3, lv["train.max_length"] == 32
        return 10 + 2 * a + 3 * b + 5 * (a and b)

    metric = metric_of(out, y)
    effects = by_term(out)
    assert {t: e["kind"] for t, e in effects.items()} == {
        ("train.lr",): "clear",
        ("train.max_length",): "clear",
        ("train.lr", "train.max_length"): "clear",
    }
    assert estimate(effects[("train.lr",)]["contrasts"][0], metric) == pytest.approx(4.5)
    assert estimate(effects[("train.max_length",)]["contrasts"][0], metric) == pytest.approx(5.5)
    pair = effects[("train.lr", "train.max_length")]["contrasts"][0]
    assert pair["levels"] == {"train.lr": 3.0e-3, "train.max_length": 32}
    assert estimate(pair, metric) == pytest.approx(5.0)
    # Every cell's runs are its two seeds.
    assert all(len(w["runs"]) == 2 for w in pair["weights"])
    assert effects[("train.lr",)]["seeds"] == 2


def test_one_at_a_time_contrasts_are_against_the_control(params):
    params["ablation"]["design"] = "one_at_a_time"
    out = plan_effects(params)
    effects = by_term(out)
    assert set(effects) == {("train.lr",), ("train.max_length",)}  # no interaction
    control = [rid for rid, r in out["runs"].items() if r["role"] == "control"]
    contrast = effects[("train.lr",)]["contrasts"][0]
    assert effects[("train.lr",)]["kind"] == "at_control"
    assert [w["weight"] for w in contrast["weights"]] == [1.0, -1.0]
    assert contrast["weights"][1]["runs"] == control
    moved = contrast["weights"][0]["runs"]
    assert all(out["runs"][r]["moved"] == ["train.lr"] for r in moved)


def test_fractional_contrasts_are_halves_and_carry_their_aliases(params):
    params["ablation"].update(design="fractional", seeds=[1])
    params["ablation"]["fractional"]["p"] = 1
    params["ablation"]["factors"] = {
        "train": {"lr": [1.0e-3, 3.0e-3], "max_length": [64, 32], "warmup_steps": [10, 0]}
    }
    out = plan_effects(params)  # 2^(3−1): C = AB, resolution III
    assert len(out["runs"]) == 4
    effects = by_term(out)
    lr = effects[("train.lr",)]
    assert lr["kind"] == "if_additive"
    assert lr["aliases"] == [["train.max_length", "train.warmup_steps"]]
    # A purely additive metric: each main effect comes out exactly.
    metric = metric_of(
        out,
        lambda lv: (
            2 * (lv["train.lr"] == 3.0e-3)
            + 3 * (lv["train.max_length"] == 32)
            + 7 * (lv["train.warmup_steps"] == 0)
        ),
    )
    assert estimate(lr["contrasts"][0], metric) == pytest.approx(2)
    assert estimate(effects[("train.warmup_steps",)]["contrasts"][0], metric) == pytest.approx(7)
    assert not any(len(t) == 2 for t in effects)  # every interaction aliased with a main effect


def test_a_plan_table_restricts_the_contrasts_to_its_kept_runs(tmp_path, params):
    runs = plan_runs(params)
    table = tmp_path / "runs.tsv"
    lines = ["run\ttrain.lr\ttrain.max_length\tseed\ttier\tkept"]
    lines += [
        f"{r.run_id}\t-\t-\t{r.seed}\t{r.tier}\t{'true' if i < 2 else 'false'}"
        for i, r in enumerate(runs)
    ]
    table.write_text("\n".join(lines) + "\n")
    out = plan_effects(params, table)
    assert [r["kept"] for r in out["runs"].values()] == [True, True] + [False] * 6
    # Control and the max_length cell at seed 1: only max_length's main effect, at the control.
    effects = by_term(out)
    assert list(effects) == [("train.max_length",)]
    assert effects[("train.max_length",)]["kind"] == "at_control"
    assert effects[("train.max_length",)]["seeds"] == 1


def test_a_plan_table_of_another_plan_is_refused_in_one_line(tmp_path, params):
    table = tmp_path / "runs.tsv"
    table.write_text("run\tseed\ttier\tkept\nrun-000000000000\t1\tcontrol\ttrue\n")
    with pytest.raises(CampaignError, match=r"runs.tsv:2: run-000000000000 is not a run of the"):
        plan_effects(params, table)
