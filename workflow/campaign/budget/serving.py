"""What one request costs to serve, per option, and when a fine-tune pays back against a
prompted floor.

A request is one prompt and its answer: `prompt_tokens` + `generated_tokens`, each the mean per
item on the split the quality is reported on, as measured: a floor's from floor_timings.json (the
floor stage adds each prompted floor's token sums to its timings), a fine-tune's generated tokens
from the predictions frame of the variant whose speed prices it (the quantize phase's
<run>/<variant>/predictions_<split>.parquet, else the run's own), its prompt tokens from the
zero-shot floor's (the same template, tokenizer and items: the floor stage's parity with the
runs). Its speed is the measured requests per second (the floor's timings, the variant's
throughput) on the device it was measured on; generated tokens/s = requests/s x generated tokens
a request. Its cost at the reference offer: price per hour / 3,600 / requests per second.

The break-even of a fine-tune against a floor (floor_vs_tuned): the requests after which what
its training cost more than the floor's fit is paid back by what it saves on each request,
ceil((fine-tune training - floor fit) / (floor per request - fine-tune per request)):
"immediately" when the fine-tune costs no more to train and no more per request, "never" when the
floor costs no more per request (a zero difference included: no division by zero) or the same to
train, "until" when the fine-tune costs less to train but more per request (it is ahead until that
count). A break-even is a cost figure for options of equal quality: it is given only against a
floor the kept cell is shown above, or not shown above (then the words say it holds if their
quality is equal); against a floor shown above the cell, or one the evaluation did not weigh, the
costs per request only ("cost only"), and the table's break_even columns are empty.
"""

from __future__ import annotations

import math
from pathlib import Path

from campaign.budget.money import format_money
from campaign.core.io import read_table
from campaign.evaluate import BELOW, NOT_SHOWN, Decisions, level_words

HOUR_S = 3600.0
MILLION = 1_000_000
# The columns add_tokens gives every equal_quality row.
TOKENS = ("prompt_tokens", "generated_tokens", "generated_tokens_per_s", "device",
          "cost_per_request", "cost_per_million_requests")  # fmt: skip
# results/budget/serving: one row per option priced per request (serving_rows).
COLUMNS = [
    "variant", "kind", "quality_split", "quality", "quality_low", "quality_high", "verdict",
    "verdict_words", *TOKENS, "throughput", "throughput_of", "train_cost", "against",
    "break_even", "break_even_requests", "currency",
]  # fmt: skip
NOT_WEIGHED = "not weighed"
# The verdicts against a floor under which a break-even means nothing: the floor's quality shown
# above the cell's, or not weighed (above floor and not shown above floor leave one).
COST_ONLY = (BELOW, NOT_WEIGHED)


def break_even(extra_train: float, floor_request: float, tuned_request: float) -> tuple[str, float]:
    """(words, requests): when the fine-tune's extra training (its training cost minus the
    floor's fit) is paid back by its saving per request (floor's cost per request minus its
    own). ("after", N): N requests, N >= 1; ("immediately", 0): cheaper or equal on both;
    ("never", nan): the floor costs no more per request while the fine-tune costs more to
    train; ("until", N): cheaper to train, dearer per request, ahead for N requests;
    ("unknown", nan): a cost not measured. An equal training cost and a dearer request:
    "never". The ratio is rounded to 9 significant digits before it is rounded to a count, so
    that a float's last bit does not add a request (0.3 / (0.3 - 0.2) is 3, not 4)."""
    if not all(math.isfinite(x) for x in (extra_train, floor_request, tuned_request)):
        return "unknown", math.nan
    saving = floor_request - tuned_request
    if extra_train <= 0 and saving >= 0:
        return "immediately", 0.0
    if saving == 0 or (saving < 0 and extra_train >= 0):
        return "never", math.nan
    ratio = float(f"{extra_train / saving:.9g}")
    if saving < 0:  # cheaper to train, dearer to serve
        return "until", float(math.floor(ratio))
    return "after", float(max(1, math.ceil(ratio)))


def per_request(throughput: float, price_per_hour: float) -> float:
    """The cost of one request at `price_per_hour` from `throughput` requests per second."""
    if not (math.isfinite(throughput) and throughput > 0):
        return math.nan
    return price_per_hour / HOUR_S / throughput


def floor_tokens(timed: dict, split: str) -> tuple[float, float]:
    """(prompt, generated) tokens per request of a floor on `split`, from its timings (the
    floor stage's sums over the split's items); (nan, nan) where not recorded."""
    p = (timed.get("predict") or {}).get(split) or {}
    items = p.get("items") or 0
    if items <= 0 or "new_tokens" not in p:
        return math.nan, math.nan
    return p.get("prompt_tokens", math.nan) / items, p["new_tokens"] / items


def frame_tokens(paths: list[Path]) -> float:
    """The mean generated tokens per item (new_tokens) of the first predictions frame that
    exists among `paths`; nan without one. A damaged frame: one line naming it."""
    for path in paths:
        if path.is_file():
            frame = read_table(path)
            if "new_tokens" not in frame.columns or not len(frame):
                return math.nan  # a label task's predictions: no generated tokens
            return float(frame["new_tokens"].mean())
    return math.nan


def devices(variants: list[Path]) -> dict[tuple[str, str], str]:
    """{(run, variant): device} of the measured variants (optional table)."""
    if not variants:
        return {}
    frame = read_table(variants[0], ("run", "variant"))
    if "device" not in frame.columns:
        return {}
    return {(str(r.run), str(r.variant)): str(r.device) for r in frame.itertuples()}


def tuned_option(decisions: Decisions | None, equal: list[dict]) -> dict | None:
    """The fine-tune a floor is weighed against: the chosen cell's representative run's
    cheapest-to-serve row (it or an adopted quantized variant of it), else the cell's row
    cheapest in total; None without a priced one."""
    rows = [e for e in equal if e["kind"] != "floor" and math.isfinite(e["serve_cost"])]
    rep = decisions.best_cell.representative_run if decisions and decisions.best_cell else None
    mine = [e for e in rows if rep and (e["variant"] == rep or e["variant"].startswith(f"{rep}/"))]
    if mine:
        return min(mine, key=lambda e: (e["serve_cost"], e["variant"]))
    return min(rows, key=lambda e: (e["total_cost"], e["variant"])) if rows else None


def floor_verdict(decisions: Decisions, floor: str) -> tuple[str, str]:
    """(decision, words) of the best cell against `floor`, in the evaluation's words: its
    verdict's comparison with the best floor ("above floor", "not shown above floor", "below
    floor"), or a below_floor flag of the cell ("not shown above floor", "below floor"); else
    "not weighed". The cell is "the kept cell" unless the verdict keeps a floor."""
    cell = decisions.best_cell.cell if decisions.best_cell is not None else None
    verdict = decisions.verdict
    noun = "the best cell" if verdict is not None and verdict.kind == "floor" else "the kept cell"
    against = verdict.against_floor if verdict is not None else None
    if against is not None and against.floor == floor:
        how = ""
        if against.estimate is not None:
            low, high = against.ci_low, against.ci_high
            span = f" [{100 * low:+.1f}, {100 * high:+.1f}]" if low is not None else ""
            how = f" ({100 * against.estimate:+.1f} points{span} on {against.split})"
        return against.decision, f"{noun} {cell}: {against.decision}{how}"
    for f in decisions.below_floor:
        if f.cell == cell and f.floor == floor:
            return f.verdict, f"{noun} {cell}: {f.verdict}"
    return NOT_WEIGHED, f"not weighed against {noun} (the evaluation weighs the best floor)"


def floor_option(name: str, timed: dict, price: float, b: dict, quality: dict, split) -> dict:
    """A floor as an equal_quality row: its fit is its training (fit_seconds), its measured
    requests/s serve budget.predictions at `price` per hour; quality: {variant: (value, low,
    high)} on `split`."""
    train_hours = timed.get("fit_seconds", math.nan) / HOUR_S
    throughput = _number(timed.get("throughput"))
    serve_hours = b["predictions"] / throughput / HOUR_S if throughput > 0 else math.nan
    q = quality.get(name, (math.nan, math.nan, math.nan))
    return {
        "variant": name, "run": None, "kind": "floor", "decision": "", "quality_split": split,
        "quality": q[0], "quality_low": q[1], "quality_high": q[2],
        "train_hours": train_hours, "train_cost": train_hours * price,
        "throughput": throughput, "throughput_of": "floor_timings.json",
        "serve_hours": serve_hours, "serve_cost": serve_hours * price,
        "total_cost": train_hours * price + serve_hours * price, "currency": b["currency"],
        "cheapest": False,
    }  # fmt: skip


def add_tokens(
    equal: list[dict], floors: dict, frames: dict, where: dict, split: str, price: float
) -> None:
    """Each row (equal_quality's shape) with what a request holds and costs: prompt_tokens,
    generated_tokens (per request on `split`), generated_tokens_per_s, device,
    cost_per_request and cost_per_million_requests (at `price` per hour). floors:
    floor_timings.json's "floors"; frames: {run: the folder of its own predictions}; where:
    {"variants": the quantize phase's folder or None, "devices": devices(...)}. A fine-tune's
    prompt is the zero-shot floor's (the same template, tokenizer and items)."""
    prompt_of_runs = floor_tokens(floors.get("floor/zero_shot", {}), split)[0]
    for e in equal:
        if e["kind"] == "floor":
            timed = floors.get(e["variant"], {})
            prompt, generated = floor_tokens(timed, split)
            device = timed.get("device", "")
        else:
            run, _, variant = e["throughput_of"].partition("/")
            paths = [frames[run] / f"predictions_{split}.parquet"] if run in frames else []
            if where.get("variants") is not None:
                paths.insert(0, where["variants"] / run / variant / f"predictions_{split}.parquet")
            prompt, generated = prompt_of_runs, frame_tokens(paths)
            device = where.get("devices", {}).get((run, variant), "")
        thr = e["throughput"]
        fast = math.isfinite(thr) and thr > 0
        per = per_request(thr, price)
        e |= {
            "prompt_tokens": prompt,
            "generated_tokens": generated,
            "generated_tokens_per_s": thr * generated if fast else math.nan,
            "device": device,
            "cost_per_request": per,
            "cost_per_million_requests": per * MILLION,
        }


def _number(value) -> float:
    return math.nan if value is None else float(value)


def serving_rows(decisions, equal: list[dict], floor_rows: list[dict]) -> list[dict]:
    """One row per option priced per request: the fine-tune the floors are weighed against
    (tuned_option) and every floor that ran (floor_rows, equal_quality's row shape with
    add_tokens' columns), each floor with the evaluation's words about the kept cell against it
    and the fine-tune's break-even against it where their quality is not shown different in the
    floor's favour; against the others (COST_ONLY) break_even is None, break_even_requests
    nan."""
    tuned = tuned_option(decisions, equal)
    rows = []
    verdict = decisions.verdict if decisions is not None else None
    if tuned is not None:
        kept = "kept" if verdict is None or verdict.kind != "floor" else f"not kept: {verdict.keep}"
        rows.append(tuned | {"verdict": kept,
                             "verdict_words": "", "against": "", "break_even": "",
                             "break_even_requests": math.nan})  # fmt: skip
    for f in floor_rows:
        decision, said = floor_verdict(decisions, f["variant"])
        words, n = "unknown", math.nan
        if decision in COST_ONLY:
            words = None  # cost only: no break-even between options of different quality
        elif tuned is not None:
            extra = tuned["train_cost"] - (f["train_cost"] if math.isfinite(f["train_cost"]) else 0)
            words, n = break_even(extra, f["cost_per_request"], tuned["cost_per_request"])
        rows.append(f | {"verdict": decision, "verdict_words": said,
                         "against": tuned["variant"] if tuned else "", "break_even": words,
                         "break_even_requests": n})  # fmt: skip
    return rows


def serving_lines(rows: list[dict], offer: str, gpu: str, metric: str, currency: str) -> list[str]:
    """The equal-quality block's serving lines: each option's request (tokens in and out), its
    measured speed and its cost per million requests at the reference offer, its quality; then
    each floor's verdict and the fine-tune's break-even against it."""
    if not rows:
        return []
    money = lambda x: format_money(x, currency)  # noqa: E731
    out = [f"Serving one request at the offer '{offer}' ({gpu}), as measured:"]
    for r in rows:
        tokens = ""
        if math.isfinite(r["generated_tokens"]):
            tokens = (
                f"{_tokens(r['prompt_tokens'])} prompt + {r['generated_tokens']:.1f} generated "
                "tokens; "
            )
        speed = "speed not measured"
        if math.isfinite(r["throughput"]):
            speed = f"{r['throughput']:.3g} requests/s"
        if math.isfinite(r["generated_tokens_per_s"]):
            where = f" on {r['device']}" if r["device"] else ""
            speed += f", {r['generated_tokens_per_s']:.3g} generated tokens/s{where}"
        level = level_words(r["quality"], r["quality_low"], r["quality_high"])
        out.append(
            f"  {r['variant']}: {tokens}{speed}; {money(r['cost_per_million_requests'])} per "
            f"million requests; {r['quality_split']} {metric} {level}."
        )
    tuned = next((r for r in rows if r["kind"] != "floor"), None)
    for r in rows:
        if r["kind"] == "floor":
            pays = _pays(r, money) if r["break_even"] is not None else _costs(r, tuned, money)
            if r["verdict"] == NOT_SHOWN and r["against"]:
                pays = (
                    "if their quality is equal — the evaluation has not shown the fine-tune "
                    f"above this floor — {pays}"
                )
            out.append(f"  Against {r['variant']}: {r['verdict_words']}; {pays}.")
    return out


def _costs(r: dict, tuned: dict | None, money) -> str:
    """A floor's line without a break-even: the two costs per million requests, and why."""
    why = "the evaluation has not weighed their quality"
    if r["verdict"] != NOT_WEIGHED:
        why = f"their quality differs, the cell is {r['verdict']}"
    mine = f"{money(r['cost_per_million_requests'])} per million requests for this floor"
    if tuned is None:
        return f"cost only: {mine} (no break-even: {why})"
    return (
        f"cost only: {money(tuned['cost_per_million_requests'])} per million requests for the "
        f"fine-tune {tuned['variant']}, {mine} (no break-even: {why})"
    )


def _tokens(x: float) -> str:
    return f"{x:.1f}" if math.isfinite(x) else "?"


def _pays(r: dict, money) -> str:
    if not r["against"]:
        return "no fine-tune at the bar has a measured serving cost to weigh it against"
    who = f"the fine-tune {r['against']}"
    n = r["break_even_requests"]
    if r["break_even"] == "after":
        return f"{who} pays back after {n:,.0f} requests"
    if r["break_even"] == "immediately":
        return f"{who} costs no more to train nor per request: it pays back immediately"
    if r["break_even"] == "until":
        return f"{who} costs less to train but more per request: cheaper until {n:,.0f} requests"
    if r["break_even"] == "never":
        return f"{who} never pays back (the floor costs no more per request)"
    return f"{who}: break-even unknown (a cost not measured)"


def price_requests(inputs: dict, decisions, bar: dict | None, equal: list[dict], b: dict,
                   price: float, quality: dict) -> list[dict]:  # fmt: skip
    """The serving table (serving_rows) from the budget stage's inputs, and add_tokens'
    columns on every equal_quality row. Every floor that ran (floor_timings.json) is priced,
    at the bar or not; nothing without a quality bar (no kept cell to weigh them against)."""
    from campaign.core.io import read_json

    if bar is None:
        return []
    paths = inputs.get("floor_timings", [])
    floors = read_json(paths[0]).get("floors", {}) if paths else {}
    variants = inputs.get("variants", [])
    where = {"variants": variants[0].parent if variants else None, "devices": devices(variants)}
    frames = {p.parent.name: p.parent for p in inputs.get("timings", [])}
    split = bar["split"]
    floor_rows = [floor_option(n, t, price, b, quality, split) for n, t in sorted(floors.items())]
    for rows in (equal, floor_rows):
        add_tokens(rows, floors, frames, where, split, price)
    return serving_rows(decisions, equal, floor_rows)
