"""MLflow logging of the experiment index: one run per index row under one parent run per
campaign, found again by tags so a rerun updates instead of duplicating.

Credentials never travel in the tracking URI: params, the stage's ``--spec`` and so
Snakemake's command lines, logs and metadata hold the URI alone. They come, as MLflow's client
takes them, from the environment of the job: ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` (HTTP Basic) or ``MLFLOW_TRACKING_TOKEN`` (Bearer); a URI with a
user name or password is refused in one line that says so (``check_uri``). The health probe
sends the same credentials as the client will.

A row's run is the one in the experiment whose tags carry the campaign's name and the row's
track key (its store key; for a floor, which has none, a hash of its name and the split), so
two campaigns logging to one experiment never touch each other's runs, and a retrained run (a
new store key) is a new MLflow run beside the old one.
"""

from __future__ import annotations

import base64
import math
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_value

LOCAL_URI = "sqlite:///results/mlflow.db"  # uri: null, relative to the project folder
ARTIFACTS = "results/mlartifacts"  # where a local store's experiment keeps its artifacts
TAG = "campaign."  # prefix of every tag this phase sets
PROBE_SECONDS = 10
# Identity and provenance of a row, as tags (searchable, editable in the UI).
ROW_TAGS = ("kind", "run", "variant", "cell", "seed", "tier", "status", "store_key",
            "code_version", "spec_hash", "dataset_hash", "split_hash", "train_split_hash",
            "validation_split_hash", "test_split_hash", "hash_algorithm", "model_hash",
            "decision", "decision_against", "floor_verdict", "best_cell")  # fmt: skip
ROW_METRICS = ("validation_value", "validation_ci_low", "validation_ci_high", "test_value",
               "test_ci_low", "test_ci_high", "decision_estimate", "decision_ci_low",
               "decision_ci_high", "hours", "cost")  # fmt: skip


def safe_uri(uri: str) -> str:
    """The URI without a user name or password, for messages and the logged record."""
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def resolve_uri(uri: str | None, root: Path) -> str:
    """The URI the client opens: a local SQLite store under results/ for null."""
    if uri is None:
        return f"sqlite:///{(Path(root) / 'results' / 'mlflow.db').resolve()}"
    return uri


USER_VAR, PASSWORD_VAR, TOKEN_VAR = (
    "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
)  # fmt: skip


def check_uri(uri: str | None, key: str = "tracking.mlflow.uri") -> None:
    """CampaignError (one line, without the secret) when the URI carries a user name or password:
    params reach the stage's command line, Snakemake's logs and its metadata."""
    if uri is None:
        return
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return
    if parts.scheme in ("http", "https"):
        where = (
            f"remove them from the URI and set {USER_VAR} and {PASSWORD_VAR} (or {TOKEN_VAR}) "
            "in the environment that runs snakemake, as MLflow's own client reads them"
        )
    else:
        where = "remove them from the URI and give them to the database driver (~/.pgpass, ...)"
    raise CampaignError(
        f"{key}: {safe_uri(uri)} is given with a user name or password, which would be written "
        f"to Snakemake's logs and metadata; {where}"
    )


def auth_header() -> dict[str, str]:
    """The Authorization header MLflow's client sends, from the same environment variables."""
    if os.environ.get(TOKEN_VAR):
        return {"Authorization": f"Bearer {os.environ[TOKEN_VAR]}"}
    user, password = os.environ.get(USER_VAR), os.environ.get(PASSWORD_VAR)
    if user and password:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {pair}"}
    return {}


def probe(uri: str) -> None:
    """A tracking server over HTTP must answer its health check within PROBE_SECONDS, with the
    credentials of the environment when it asks for some; else one line (MLflow's client would
    retry for minutes and end in a traceback)."""
    if urlsplit(uri).scheme not in ("http", "https"):
        return
    check_uri(uri)
    headers = auth_header()
    request = urllib.request.Request(uri.rstrip("/") + "/health", headers=headers)
    tail = "nothing was logged (the campaign's results are unaffected)"
    try:
        with urllib.request.urlopen(request, timeout=PROBE_SECONDS):
            pass
    except urllib.error.HTTPError as e:
        if e.code in (401, 403) and headers:
            bearer = headers["Authorization"].startswith("Bearer")
            sent = f"${TOKEN_VAR}" if bearer else f"${USER_VAR} and ${PASSWORD_VAR}"
            raise CampaignError(
                f"tracking.mlflow.uri: the tracking server {uri} refused the credentials in "
                f"{sent} ({e.code}); {tail}"
            ) from None
        if e.code in (401, 403) and not os.environ.get("MLFLOW_TRACKING_AUTH"):
            raise CampaignError(
                f"tracking.mlflow.uri: the tracking server {uri} asks for credentials ({e.code}): "
                f"set {USER_VAR} and {PASSWORD_VAR} (or {TOKEN_VAR}) in the environment; {tail}"
            ) from None
        if e.code in (401, 403):  # an auth plugin of the client's (MLFLOW_TRACKING_AUTH) decides
            return
        raise CampaignError(
            f"tracking.mlflow.uri: the tracking server {uri} answered {e.code} to "
            f"its health check; {tail}"
        ) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise CampaignError(
            f"tracking.mlflow.uri: cannot reach the tracking server {uri} ({reason}); {tail}"
        ) from None


def track_key(row: dict) -> str:
    if row.get("store_key"):
        return row["store_key"]
    return hash_value({"name": row["name"], "split_hash": row.get("split_hash")})


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    return str(value)


def _number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def flatten(value, prefix: str) -> dict[str, str]:
    """{"recipe.train.lr": "0.003", ...}: a nested recipe as MLflow params (text values)."""
    if isinstance(value, dict):
        out = {}
        for k in sorted(value):
            out |= flatten(value[k], f"{prefix}.{k}")
        return out
    return {prefix: _text(value)}


def row_params(row: dict, factors: list[str], recipe: dict | None) -> dict[str, str]:
    params = {f"factor.{f}": _text(row.get(f)) for f in factors}
    if recipe is not None:
        params |= flatten(recipe, "recipe")
    return params


def row_metrics(row: dict) -> dict[str, float]:
    """The decision metric on both splits with its interval (named after the metric, e.g.
    validation_accuracy, validation_accuracy_ci_low), the decision's estimate, hours, cost."""
    metric = row.get("metric") or "metric"
    out = {}
    for name in ROW_METRICS:
        value = _number(row.get(name))
        if value is None:
            continue
        split, _, what = name.partition("_")
        if split in ("validation", "test"):
            name = f"{split}_{metric}" + ("" if what == "value" else f"_{what}")
        out[name] = value
    return out


def row_tags(row: dict, campaign: str) -> dict[str, str]:
    tags = {f"{TAG}{k}": _text(row.get(k)) for k in ROW_TAGS}
    return tags | {f"{TAG}name": campaign, f"{TAG}row": row["name"],
                   f"{TAG}track_key": track_key(row), "mlflow.runName": row["name"]}  # fmt: skip


class Logger:
    """One campaign's runs in one experiment: find by tags, create or update."""

    def __init__(self, uri: str, experiment: str, campaign: str, artifact_location: str | None):
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.campaign = campaign
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=artifact_location, tags={f"{TAG}name": campaign}
            )
        else:
            self.experiment_id = found.experiment_id
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TAG}name` = '{campaign}'",
            max_results=50000,
        )
        self.existing = {r.data.tags.get(f"{TAG}track_key"): r for r in runs}

    def upsert(
        self,
        key: str,
        tags: dict,
        params: dict,
        metrics: dict,
        curves: dict | None = None,
        parent: str | None = None,
    ) -> tuple[str, str]:
        """(run id, "created" | "updated"): params not yet there, metrics whose latest value
        differs, the curves only on a new run (a store key's curve never changes)."""
        from mlflow.entities import Metric, Param, RunTag

        tags = {**tags, f"{TAG}track_key": key}
        if parent is not None:
            tags["mlflow.parentRunId"] = parent
        run = self.existing.get(key)
        if run is None:
            run = self.client.create_run(self.experiment_id, tags=tags)
            action, old_params, old_metrics = "created", {}, {}
        else:
            action, old_params, old_metrics = "updated", run.data.params, run.data.metrics
        run_id = run.info.run_id
        now = int(1000 * time.time())
        new_metrics = [Metric(k, v, now, 0) for k, v in metrics.items() if old_metrics.get(k) != v]
        if action == "created":
            for name, points in (curves or {}).items():
                new_metrics += [Metric(f"curve/{name}", v, now, s) for s, v in points]
        new_params = [Param(k, v) for k, v in params.items() if k not in old_params]
        tag_list = [RunTag(k, v) for k, v in tags.items()]
        for i in range(0, max(len(new_metrics), 1), 1000):  # MLflow's batch limit
            self.client.log_batch(
                run_id,
                metrics=new_metrics[i : i + 1000],
                params=new_params if i == 0 else [],
                tags=tag_list if i == 0 else [],
            )
        self.client.set_terminated(run_id, "FINISHED")
        self.existing[key] = self.client.get_run(run_id)
        return run_id, action

    def artifacts(self, run_id: str, files: dict[str, list[Path]]) -> None:
        for folder, paths in files.items():
            for path in paths:
                self.client.log_artifact(run_id, str(path), artifact_path=folder)


def open_logger(uri: str | None, experiment: str, campaign: str, root: Path) -> Logger:
    check_uri(uri)  # a spec written by hand, not through params
    resolved = resolve_uri(uri, root)
    probe(resolved)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    location = None
    if uri is None:
        (Path(root) / "results").mkdir(parents=True, exist_ok=True)
        location = (Path(root) / ARTIFACTS).resolve().as_uri()
    return Logger(resolved, experiment, campaign, location)
