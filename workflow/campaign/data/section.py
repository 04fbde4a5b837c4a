"""What the data phase shows: its report sections (the records, licences and privacy scan; the
leakage audit), their figures, and its findings (privacy, artifacts, leakage audit).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from campaign.core.figures import BAD, GOOD, NEUTRAL, empty_axes, figure_axes
from campaign.core.io import get, read_json, read_table
from campaign.core.stage import Section
from campaign.data.audit import LEAK_ROWS


def data_section(
    manifest_path: Path,
    privacy_path: Path,
    artifacts_path: Path | None = None,
    preflight_path: Path | None = None,
    lengths: pd.DataFrame | None = None,
) -> Section:
    """Records, licences, the privacy scan of the text and, given the artifact scan's findings
    (results/data/artifact_findings.json), of what the campaign produced from it; given the
    preflight's report, the records that spell a special token of the run's tokenizer. Given
    `lengths` (the task's report_data: a task without labels), its lengths per split stand
    where the labels' count and chart stand."""
    manifest = read_table(manifest_path, ("id", "source", "licence", "label"))
    privacy = read_json(privacy_path, ("kinds", "n_flagged", "n_records"))
    sources = (
        manifest.groupby("source", sort=True)
        .agg(
            records=("id", "size"),
            licence=("licence", lambda s: ", ".join(sorted(set(map(str, s))))),
            labels=("label", "nunique"),
        )
        .reset_index()
    )
    per_label = manifest.groupby(["source", "label"]).size().rename("records").reset_index()
    kinds = pd.DataFrame(
        [
            {
                "kind": kind,
                "records": int(v.get("records", 0)),
                "findings": int(v.get("findings", 0)),
            }
            for kind, v in sorted(get(privacy, "kinds", privacy_path).items())
        ],
        columns=["kind", "records", "findings"],
    )
    found = kinds[kinds["records"] > 0]
    what = f"{manifest['label'].nunique()} labels"
    if lengths is not None:
        sources = sources.drop(columns="labels")
        what = ", ".join(f"{r.split} {r.records:,}" for r in lengths.itertuples())
    lines = [
        f"{len(manifest):,} records from {len(sources)} source(s), {what}.",
        "Licence per source: "
        + "; ".join(f"{r.source}: {r.licence}" for r in sources.itertuples())
        + ".",
        f"Privacy scan: {privacy['n_flagged']} of {privacy['n_records']:,} records flagged"
        + (
            " (" + ", ".join(f"{r.kind} {r.records}" for r in found.itertuples()) + ")."
            if len(found)
            else "."
        ),
    ]
    tables = [("Records per source", sources), ("Privacy findings per kind", kinds)]
    if artifacts_path is not None:
        scan = read_json(artifacts_path, ("artifacts", "scanned", "flagged", "findings_by_kind"))
        flagged = pd.DataFrame(
            [
                {
                    "artifact": row.get("artifact", ""),
                    "path": row["path"],
                    "findings": ", ".join(f"{k} {n}" for k, n in sorted(row["findings"].items())),
                }
                for row in get(scan, "artifacts", artifacts_path)
                if row.get("findings")
            ],
            columns=["artifact", "path", "findings"],
        )
        by_kind = ", ".join(f"{k} {n}" for k, n in sorted(scan["findings_by_kind"].items()))
        lines.append(
            f"Artifact scan (tokenizer vocabularies, predictions, reports): {scan['flagged']} of "
            f"{scan['scanned']} artifacts hold findings" + (f" ({by_kind})." if by_kind else ".")
        )
        if len(flagged):
            tables.append(("Findings in the campaign's artifacts", flagged))
    if preflight_path is not None:
        _special_tokens(read_json(preflight_path), lines, tables)
    if lengths is not None:
        lines += length_lines(lengths)
        tables.insert(1, ("Tokens per split (prompt, response)", lengths))
        return Section(lines, tables, (lengths_figure, (lengths, kinds)))
    return Section(lines, tables, (data_figure, (per_label, kinds)))


def length_lines(lengths: pd.DataFrame) -> list[str]:
    """The lengths in words: each split's median and longest prompt and response, and the
    share of answers each max_length cuts."""
    cuts = [c for c in lengths.columns if c.startswith("truncated_at_")]
    out = []
    for r in lengths.to_dict("records"):
        sample = "" if r["measured"] == r["records"] else f" ({r['measured']:,} sampled)"
        cut = ", ".join(f"{r[c]:.1%} at max_length {c.rsplit('_', 1)[1]}" for c in cuts)
        out.append(
            f"{r['split']}{sample}: prompts {r['prompt_median']:.0f} tokens median, "
            f"{r['prompt_p95']:.0f} p95, {r['prompt_max']} max; responses "
            f"{r['response_median']:.0f} median, {r['response_p95']:.0f} p95, "
            f"{r['response_max']} max; answers cut: {cut or 'not measured'}."
        )
    return out


def leakage_section(audit_path: Path) -> Section:
    audit = read_json(audit_path, ("leaks", "splits", "method", "records"))
    naive = (audit.get("naive_split") or {}).get("leaks") or {}
    leaks = pd.DataFrame(
        [
            {
                "what": label,
                "this_split": int(get(audit, ("leaks", key), audit_path)),
                "naive_split": int(naive.get(key, 0)),
            }
            for label, key in LEAK_ROWS
        ]
    )
    splits = pd.DataFrame(
        [
            {"split": name, **{k: s.get(k) for k in ("records", "units", "share", "target")}}
            for name, s in sorted(audit["splits"].items())
        ]
    )
    total = leaks.set_index("what").loc["leaking pairs, total"]
    lines = [
        f"Split method {audit['method']}: {audit['records']:,} records in "
        f"{audit.get('units', '?')} units.",
        f"Leaking pairs across splits: {total['this_split']:,} with this split"
        + (
            f"; a naive split ({audit['naive_split'].get('what', 'per-record')}) would have "
            f"leaked {total['naive_split']:,} pairs, and "
            f"{int(naive.get('eval_records_with_train_partner', 0)):,} evaluation records would "
            f"have had a partner in train."
            if naive
            else "; no naive split was recorded."
        ),
    ]
    return Section(
        lines,
        [("Leaks: this split vs a naive split", leaks), ("Split sizes", splits)],
        (leakage_figure, (leaks,)),
    )


def _special_tokens(preflight: dict, lines: list, tables: list) -> None:
    """The line and table of the records that spell a special token (data/control_tokens.py),
    when the preflight's tokenization check looked (a conversational campaign)."""
    from campaign.data.control_tokens import special_token_findings

    found = ((preflight.get("tokenization") or {}).get("details") or {}).get("special_tokens")
    if not found:
        return
    said = special_token_findings(found)
    lines.append(
        said[0].removeprefix("data: ")[:1].upper() + said[0].removeprefix("data: ")[1:] + "."
        if said
        else f"No record spells a special token of the tokenizer (data.special_tokens: "
        f"{found['policy']})."
    )
    if said:
        shown = pd.DataFrame(found["shown"], columns=["record", "field", "token"])
        tables.append(("Records that spell a special token (first ones)", shown))


def render_data(inputs) -> Section:
    return data_section(
        inputs.one("manifest"),
        inputs.one("privacy"),
        inputs.optional("artifact_findings"),
        inputs.optional("preflight_report"),
        token_lengths(inputs),
    )


def token_lengths(inputs) -> pd.DataFrame | None:
    """The task's report_data (campaign.core.tasks) for the split files, with the first
    finished run's saved tokenizer and every run's spec; None before a run finished, or for a
    task that draws records per label."""
    from campaign.core.tasks import module_of

    models = {p.parent.name: p for p in inputs.paths("run_models")}
    specs = {p.parent.name: p for p in inputs.paths("run_specs")}
    runs = sorted(set(models) & set(specs))
    splits = {s: inputs.optional(f"split_{s}") for s in ("train", "validation", "test")}
    if not runs or None in splits.values():
        return None
    spec = [read_json(specs[r], ("model", "train")) for r in runs]
    task = module_of(spec[0]["model"]["task"])
    return task.report_data(splits, models[runs[0]], spec, Path.cwd())


def render_leakage(inputs) -> Section:
    return leakage_section(inputs.one("leakage_audit"))


def data_figure(per_source_label: pd.DataFrame, privacy_kinds: pd.DataFrame):
    """Left: records per label, stacked by source. Right: privacy findings per kind.

    per_source_label: columns source, label, records. privacy_kinds: columns kind, records.
    """
    fig, (left, right) = figure_axes(2)
    if per_source_label.empty:
        empty_axes(left, "no records")
    else:
        table = per_source_label.pivot_table(
            index="label", columns="source", values="records", aggfunc="sum", fill_value=0
        ).sort_index()
        bottom = pd.Series(0, index=table.index)
        for source in table.columns:
            left.bar(table.index, table[source], bottom=bottom, label=source)
            bottom = bottom + table[source]
        left.set_ylabel("records")
        left.set_title("Records per label and source")
        left.tick_params(axis="x", rotation=30)
        left.legend(fontsize="small")
    kinds = privacy_kinds.sort_values("kind", ascending=False)
    if kinds.empty:
        empty_axes(right, "no privacy scan")
    else:
        colors = [BAD if n > 0 else NEUTRAL for n in kinds["records"]]
        right.barh(kinds["kind"], kinds["records"], color=colors)
        for y, n in enumerate(kinds["records"]):
            right.text(n, y, f" {int(n)}", va="center", fontsize="small")
        right.set_xlabel("records flagged")
        right.set_title("Privacy findings per kind")
        right.set_xlim(0, max(1, kinds["records"].max()) * 1.2)
    fig.tight_layout()
    return fig


def lengths_figure(lengths: pd.DataFrame, privacy_kinds: pd.DataFrame):
    """Left: prompt and response tokens per split (median bar, p95 and max marks). Right:
    privacy findings per kind (as data_figure)."""
    import numpy as np

    fig = data_figure(pd.DataFrame(columns=["source", "label", "records"]), privacy_kinds)
    left = fig.axes[0]
    left.clear()
    x = np.arange(len(lengths))
    for offset, what in ((-0.2, "prompt"), (0.2, "response")):
        left.bar(x + offset, lengths[f"{what}_median"], width=0.4, label=f"{what} (median)")
        left.scatter(x + offset, lengths[f"{what}_p95"], marker="_", s=200, color="black")
        left.scatter(x + offset, lengths[f"{what}_max"], marker="v", color="black")
    left.set_xticks(
        x,
        [f"{s}\n{n:,} records" for s, n in zip(lengths["split"], lengths["records"], strict=True)],
    )
    left.set_ylabel("tokens")
    left.set_title("Tokens per split (bar: median; dash: p95; triangle: max)", fontsize="small")
    left.legend(fontsize="small")
    fig.tight_layout()
    return fig


def leakage_figure(leaks: pd.DataFrame):
    """What crosses between train and the evaluation splits: this split vs a naive one.

    leaks: columns what, this_split, naive_split (counts; a symlog axis keeps zeros visible).
    """
    fig, (ax,) = figure_axes()
    y = range(len(leaks))
    h = 0.38
    ax.barh([i + h / 2 for i in y], leaks["naive_split"], height=h, color=BAD, label="naive split")
    ax.barh([i - h / 2 for i in y], leaks["this_split"], height=h, color=GOOD, label="this split")
    for i, (a, b) in enumerate(zip(leaks["this_split"], leaks["naive_split"], strict=True)):
        ax.text(b, i + h / 2, f" {int(b)}", va="center", fontsize="small")
        ax.text(a, i - h / 2, f" {int(a)}", va="center", fontsize="small")
    ax.set_yticks(list(y), leaks["what"])
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, max(10, leaks[["this_split", "naive_split"]].to_numpy().max()) * 40)
    ax.set_xlabel("count (symmetric log scale)")
    ax.set_title("Leaks across splits: this split vs a naive per-record split")
    ax.legend(loc="center right")
    fig.tight_layout()
    return fig
