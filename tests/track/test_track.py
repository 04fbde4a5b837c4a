"""The track stage on a small campaign written with the index's own writer: MLflow's client
finds one run per index row with its params, metrics and tags under one parent; a second run
updates them instead of adding any; another campaign in the same experiment leaves them alone;
TensorBoard's reader finds each run's curves as metrics.parquet has them; a tracking server that
cannot be reached is one line and a non-zero exit."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from campaign.core.runner import StageContext
from conftest import REPO, env

SPEC = {"campaign": "demo", "mlflow": {"uri": None, "experiment": "demo"}, "tensorboard": True}
RUNS = ("run-aaaa", "run-bbbb")
LR = {"run-aaaa": 0.001, "run-bbbb": 0.003}


def _curve(run: str) -> pd.DataFrame:
    """4 train steps (loss 2.0 - 0.25 * step, scaled by the run), validation at steps 2 and 4."""
    scale = 1.0 if run == "run-aaaa" else 0.5
    train = [
        {"step": s, "split": "train", "loss": scale * (2.0 - 0.25 * s), "accuracy": None,
         "lr": LR[run] * s / 4}
        for s in range(1, 5)
    ]  # fmt: skip
    val = [
        {"step": s, "split": "validation", "loss": scale * (1.9 - 0.25 * s),
         "accuracy": 0.5 + 0.1 * s, "lr": None}
        for s in (2, 4)
    ]  # fmt: skip
    frame = pd.DataFrame(train + val)
    return frame.astype({"step": "int64", "split": "string", "loss": "float64",
                         "accuracy": "float64", "lr": "float64"})  # fmt: skip


def _row(name: str, kind: str, run: str | None, variant: str, **extra) -> dict:
    return {
        "name": name, "kind": kind, "run": run, "variant": variant, "status": "ok",
        "dataset_hash": "d" * 8, "split_hash": "s" * 8, "train_split_hash": "t" * 8,
        "validation_split_hash": "v" * 8, "test_split_hash": "e" * 8, "hash_algorithm": "blake3",
        "metric": "accuracy", **extra,
    }  # fmt: skip


def write_campaign(root: Path) -> dict[str, list[Path]]:
    """A finished campaign's files as the track rule gives them: 2 runs, 1 variant, 1 floor."""
    from campaign.index.stage import write_index

    results = root / "results"
    rows = []
    for i, run in enumerate(RUNS):
        folder = results / "runs" / run
        folder.mkdir(parents=True)
        _curve(run).to_parquet(folder / "metrics.parquet")
        spec = {"seed": 1 + i, "train": {"lr": LR[run], "max_steps": 4}, "model": {"task": "x"}}
        (folder / "spec.json").write_text(json.dumps(spec))
        rows.append(
            _row(
                run,
                "run",
                run,
                "trained",
                **{"train.lr": LR[run]},
                cell=f"train.lr={LR[run]}",
                seed=1 + i,
                tier="control" if i == 0 else "main",
                store_key=f"key-{run}",
                code_version="c1",
                validation_value=0.7 + 0.1 * i,
                validation_ci_low=0.6,
                validation_ci_high=0.9,
                test_value=0.65,
                test_ci_low=0.5,
                test_ci_high=0.8,
                decision=None if i == 0 else "adopt",
                hours=0.5 * (i + 1),
                cost=2.0 * (i + 1),
                best_cell=i == 1,
            )  # fmt: skip
        )
    rows.append(
        _row(
            "run-bbbb/int8_dynamic",
            "quantized",
            "run-bbbb",
            "int8_dynamic",
            **{"train.lr": 0.003},
            cell="train.lr=0.003",
            seed=2,
            tier="main",
            store_key="key-q",
            validation_value=0.79,
            test_value=0.64,
            decision="non-inferior",
        )  # fmt: skip
    )
    rows.append(_row("floor/majority", "floor", None, "majority", validation_value=0.2,
                     test_value=0.25))  # fmt: skip
    write_index(["train.lr"], rows, {"train.lr": "float64"}, results / "index.parquet")
    (results / "evaluation").mkdir()
    (results / "evaluation" / "decisions.json").write_text(
        json.dumps(
            {
                "decide_on": "validation",
                "metric": "accuracy",
                "best_cell": {"cell": "train.lr=0.003"},
            }
        )
    )
    files = {"decisions": results / "evaluation" / "decisions.json"}
    artifacts = {"report_html": "report/index.html", "report_markdown": "report/summary.md",
                 "budget_summary": "budget/summary.txt", "jobs": "budget/jobs.parquet",
                 "plans": "budget/plans.parquet",
                 "forecast": "budget/forecast.parquet"}  # fmt: skip
    for name, rel in artifacts.items():
        (results / rel).parent.mkdir(parents=True, exist_ok=True)
        (results / rel).write_text(f"{name}\n")
        files[name] = results / rel
    # A generation campaign's samples (the evaluation's errors folder): an MLflow artifact.
    (results / "evaluation" / "errors").mkdir()
    (results / "evaluation" / "errors" / "samples.parquet").write_text("samples\n")
    files["errors"] = results / "evaluation" / "errors"
    return {
        "index": [results / "index.parquet"],
        "run_metrics": [results / "runs" / r / "metrics.parquet" for r in RUNS],
        "run_specs": [results / "runs" / r / "spec.json" for r in RUNS],
        **{name: [path] for name, path in files.items()},
    }


def track(root: Path, inputs: dict, out: str, spec: dict = SPEC) -> dict:
    """The stage function as the runner calls it; returns its logged.json."""
    from campaign.track.stage import stage_track

    outputs = {"logged": root / out / "logged.json", "tensorboard": root / out / "tensorboard"}
    (root / out).mkdir()
    stage_track(StageContext("track", spec, inputs, outputs, root / "work", root))
    return json.loads(outputs["logged"].read_text())


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    root = tmp_path_factory.mktemp("track")
    inputs = write_campaign(root)
    first = track(root, inputs, "first")
    return root, inputs, first


def _client(root: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{root / 'results' / 'mlflow.db'}")


def _runs(root: Path, campaign: str = "demo") -> list:
    client = _client(root)
    experiment = client.get_experiment_by_name("demo")
    return client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`campaign.name` = '{campaign}'"
    )


def test_one_mlflow_run_per_index_row_with_params_metrics_and_tags(tracked):
    root, _, first = tracked
    index = pd.read_parquet(root / "results" / "index.parquet")
    runs = _runs(root)
    by_row = {r.data.tags.get("campaign.row"): r for r in runs}
    parent = by_row.pop(None)  # the campaign's parent run has no index row
    assert parent.data.tags["campaign.verdict"] == "train.lr=0.003"
    assert parent.data.metrics == {"hours": 1.5, "cost": 6.0}  # 0.5 + 1.0 h, 2 + 4 money
    assert sorted(by_row) == sorted(index["name"])  # runs = index rows, no more
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in by_row.values())
    assert first["parent"]["run_id"] == parent.info.run_id
    assert {r["name"]: r["run_id"] for r in first["runs"]} == {
        name: r.info.run_id for name, r in by_row.items()
    }

    b = by_row["run-bbbb"].data
    assert b.params["factor.train.lr"] == "0.003"
    assert b.params["recipe.train.lr"] == "0.003" and b.params["recipe.seed"] == "2"
    assert b.metrics["validation_accuracy"] == pytest.approx(0.8)
    assert b.metrics["validation_accuracy_ci_low"] == 0.6
    assert b.metrics["test_accuracy_ci_high"] == 0.8
    assert b.metrics["hours"] == 1.0 and b.metrics["cost"] == 4.0
    assert b.tags["campaign.store_key"] == "key-run-bbbb"
    assert b.tags["campaign.cell"] == "train.lr=0.003" and b.tags["campaign.seed"] == "2"
    assert b.tags["campaign.tier"] == "main" and b.tags["campaign.decision"] == "adopt"
    assert b.tags["campaign.code_version"] == "c1"
    assert b.tags["campaign.split_hash"] == "s" * 8
    assert b.tags["campaign.dataset_hash"] == "d" * 8
    # The training curve as a metric history: one point per train step.
    history = _client(root).get_metric_history(by_row["run-bbbb"].info.run_id, "curve/train/loss")
    assert [(m.step, m.value) for m in history] == [(1, 0.875), (2, 0.75), (3, 0.625), (4, 0.5)]

    q = by_row["run-bbbb/int8_dynamic"].data
    assert q.tags["campaign.decision"] == "non-inferior" and q.tags["campaign.kind"] == "quantized"
    assert "hours" not in q.metrics  # not costed: no metric rather than a made-up zero
    floor = by_row["floor/majority"].data
    assert floor.metrics == {"validation_accuracy": 0.2, "test_accuracy": 0.25}
    assert floor.tags["campaign.store_key"] == "null"

    samples = {a.path for a in _client(root).list_artifacts(parent.info.run_id, "samples")}
    assert samples == {"samples/samples.parquet"}
    artifacts = {a.path for a in _client(root).list_artifacts(parent.info.run_id, "budget")}
    assert artifacts == {f"budget/{f}" for f in ("summary.txt", "jobs.parquet", "plans.parquet",
                                                 "forecast.parquet")}  # fmt: skip


def test_a_second_run_updates_and_another_campaign_does_not_collide(tracked):
    root, inputs, first = tracked
    before = {r.info.run_id for r in _runs(root)}
    again = track(root, inputs, "again")
    assert {r.info.run_id for r in _runs(root)} == before  # no run added
    assert [r["action"] for r in again["runs"]] == ["updated"] * 4
    assert again["runs"] == [{**r, "action": "updated"} for r in first["runs"]]
    # The curve was not logged a second time.
    run_b = next(r["run_id"] for r in again["runs"] if r["name"] == "run-bbbb")
    assert len(_client(root).get_metric_history(run_b, "curve/train/loss")) == 4

    other = track(root, inputs, "other", {**SPEC, "campaign": "other"})
    assert [r["action"] for r in other["runs"]] == ["created"] * 4
    assert {r.info.run_id for r in _runs(root)} == before  # demo's runs untouched
    assert len(_runs(root, "other")) == 5


def test_tensorboard_curves_equal_metrics_parquet(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root, _, first = tracked
    assert first["tensorboard"] == list(RUNS)
    for run in RUNS:
        events = EventAccumulator(str(root / "first" / "tensorboard" / run))
        events.Reload()
        table = pd.read_parquet(root / "results" / "runs" / run / "metrics.parquet")
        train, val = table[table["split"] == "train"], table[table["split"] == "validation"]
        expected = {
            "train/loss": list(zip(train["step"], train["loss"], strict=True)),
            "train/lr": list(zip(train["step"], train["lr"], strict=True)),
            "validation/loss": list(zip(val["step"], val["loss"], strict=True)),
            "validation/accuracy": list(zip(val["step"], val["accuracy"], strict=True)),
        }
        assert sorted(events.Tags()["scalars"]) == sorted(expected)
        for tag, points in expected.items():
            got = [(e.step, e.value) for e in events.Scalars(tag)]
            # Event files hold 32-bit floats.
            assert [s for s, _ in got] == [s for s, _ in points]
            assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6)


def test_an_unreachable_tracking_server_is_one_line_and_nothing_written(tmp_path):
    inputs = write_campaign(tmp_path)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = {**SPEC, "mlflow": {"uri": f"http://127.0.0.1:{port}", "experiment": "x"}}
    args = ["track", "--spec", json.dumps(spec), "--state-dir", str(tmp_path / "state")]
    for name, paths in inputs.items():
        args += ["--in", f"{name}={paths[0]}", *map(str, paths[1:])]
    out = tmp_path / "out"
    args += ["--out", f"logged={out / 'logged.json'}", "--out", f"tensorboard={out / 'tb'}"]
    e = env()
    e["PYTHONPATH"] = str(REPO / "workflow")
    e["MLFLOW_TRACKING_USERNAME"], e["MLFLOW_TRACKING_PASSWORD"] = "user", "secret"
    proc = subprocess.run([sys.executable, "-m", "campaign", *args], cwd=tmp_path, env=e,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"cannot reach the tracking server http://127.0.0.1:{port}" in lines[0]
    assert "secret" not in proc.stderr + proc.stdout
    assert not (out / "logged.json").exists() and not (tmp_path / "results" / "mlflow.db").exists()


class _BasicAuthServer:
    """A real HTTP server on 127.0.0.1 that answers /health 200 only with HTTP Basic
    credentials user:s3cret-pw (as a tracking server behind an authenticating proxy does), and
    remembers the Authorization headers it got."""

    def __init__(self) -> None:
        import base64
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        want = "Basic " + base64.b64encode(b"user:s3cret-pw").decode()
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 -- http.server's name
                seen.append(self.headers.get("Authorization"))
                ok = self.headers.get("Authorization") == want
                self.send_response(200 if ok else 401)
                if not ok:
                    self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
                self.end_headers()
                self.wfile.write(b"OK" if ok else b"")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_probe_sends_the_credentials_of_the_environment(monkeypatch):
    """The health probe against a live server that demands Basic credentials: passes with
    MLflow's own environment variables, and fails in one line naming them when they are wrong or
    missing, without the password anywhere in the message."""
    from campaign.core.errors import CampaignError
    from campaign.track.mlflow_log import probe

    server = _BasicAuthServer()
    try:
        for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_AUTH"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "user")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret-pw")
        probe(server.uri)  # no error: the server took the credentials
        assert server.seen[-1] and server.seen[-1].startswith("Basic ")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong-pw")
        with pytest.raises(CampaignError) as refused:
            probe(server.uri)
        message = str(refused.value)
        assert "refused the credentials in $MLFLOW_TRACKING_USERNAME" in message
        assert "wrong-pw" not in message and "\n" not in message
        monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
        monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
        with pytest.raises(CampaignError, match="asks for credentials.*MLFLOW_TRACKING_USERNAME"):
            probe(server.uri)
        assert server.seen[-1] is None
    finally:
        server.close()


def test_a_uri_with_credentials_is_refused_before_anything_runs(tmp_path):
    """Credentials in tracking.mlflow.uri: `campaign validate` and `snakemake -n` refuse the
    params in one line that names the key and the environment variables, and the password is
    in no output, no Snakemake log and no Snakemake metadata."""
    import yaml

    from conftest import campaign, copy_project, snakemake

    project = copy_project(tmp_path / "project")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["tracking"]["mlflow"]["uri"] = "https://alice:hunter2-pw@mlflow.example.org:5000"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = campaign(project, "validate", check=False)
    assert proc.returncode != 0
    [line] = proc.stderr.strip().splitlines()
    assert "tracking.mlflow.uri" in line and "MLFLOW_TRACKING_PASSWORD" in line
    assert "https://mlflow.example.org:5000" in line
    dry = snakemake(project, "-n", check=False)
    assert dry.returncode != 0 and "MLFLOW_TRACKING_USERNAME" in dry.stdout + dry.stderr
    written = [p for p in (project / ".snakemake").rglob("*") if p.is_file()]
    for text in [proc.stdout, proc.stderr, dry.stdout, dry.stderr,
                 *(p.read_text(errors="replace") for p in written)]:  # fmt: skip
        assert "hunter2" not in text


def test_safe_uri_and_metric_names():
    from campaign.track.mlflow_log import row_metrics, safe_uri

    assert safe_uri("https://u:p@host:5000/x") == "https://host:5000/x"
    assert safe_uri("sqlite:///results/mlflow.db") == "sqlite:///results/mlflow.db"
    row = {"metric": "f1", "validation_value": 0.5, "test_ci_low": 0.1, "hours": float("nan")}
    assert row_metrics(row) == {"validation_f1": 0.5, "test_f1_ci_low": 0.1}


def test_tracking_params_reject_a_typo_and_name_the_experiment_after_the_campaign():
    import copy

    from campaign.core.errors import CampaignError
    from campaign.core.params import load_params, validate
    from campaign.track import PHASE

    params = load_params(REPO / "tests" / "fixtures" / "tiny_params.yaml")
    bad = copy.deepcopy(params)
    bad["tracking"]["mlflow"]["url"] = "http://host:5000"
    with pytest.raises(CampaignError, match=r"tracking\.mlflow.*url"):
        validate(bad)
    spec = PHASE.stages[0].spec(params)
    assert spec["mlflow"]["experiment"] == params["campaign"]["name"]
    named = copy.deepcopy(params)
    named["tracking"]["mlflow"]["experiment"] = "shared"
    assert PHASE.stages[0].spec(named)["mlflow"]["experiment"] == "shared"


@pytest.mark.slow
def test_tracking_turned_on_in_a_finished_campaign_runs_the_track_job_alone(finished_project):
    """The real rule in a real Snakemake run: on a finished campaign, `tracking.enabled: true`
    plans the track job and nothing else; its MLflow store holds one run per index row under one
    parent; a second `snakemake` has nothing to do."""
    import yaml

    from conftest import planned_jobs, snakemake

    params_path = finished_project / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["tracking"]["enabled"] = True
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    planned = planned_jobs(snakemake(finished_project, "-n"))
    assert sorted({rule for rule, _ in planned}) == ["all", "track"], planned
    snakemake(finished_project, timeout=600)
    index = pd.read_parquet(finished_project / "results" / "index.parquet")
    client = _client(finished_project)
    experiment = client.get_experiment_by_name(params["campaign"]["name"])
    runs = client.search_runs([experiment.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == len(index) and len(runs) == len(index) + 1
    assert planned_jobs(snakemake(finished_project, "-n")) == []


def test_switching_back_to_earlier_results_shows_them_in_mlflow_though_the_job_hits(tmp_path):
    """Metric A, then B, then A again: the third track job is a store hit (its inputs are A's
    bytes), and MLflow's parent run must show A's verdict and report again, not B's."""
    from campaign.core.runner import run_stage
    from campaign.core.store import Store

    inputs = write_campaign(tmp_path)
    decisions = inputs["decisions"][0]
    report = inputs["report_markdown"][0]
    a = (decisions.read_text(), "report on metric A\n")
    b = (a[0].replace("train.lr=0.003", "train.lr=0.001"), "report on metric B\n")
    store = Store(tmp_path / "state")
    results = []
    for n, (verdict_file, report_text) in enumerate((a, b, a)):
        decisions.write_text(verdict_file)
        report.write_text(report_text)
        outputs = {"logged": tmp_path / f"out{n}" / "logged.json",
                   "tensorboard": tmp_path / f"out{n}" / "tensorboard"}  # fmt: skip
        results.append(run_stage("track", SPEC, inputs, outputs, store, root=tmp_path))
    assert results[2].hit and results[2].key == results[0].key
    client = _client(tmp_path)
    (parent,) = [r for r in _runs(tmp_path) if r.data.tags.get("campaign.kind") == "campaign"]
    assert parent.data.tags["campaign.verdict"] == "train.lr=0.003"
    shown = Path(client.download_artifacts(parent.info.run_id, "report/summary.md", tmp_path))
    assert shown.read_text() == "report on metric A\n"
