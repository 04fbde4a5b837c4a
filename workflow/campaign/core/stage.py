"""What a phase declares: its stages (name, entry, inputs and outputs with their paths, params
subset) and checks.

A phase is a subpackage of `campaign` whose `__init__` defines `PHASE = Phase(...)`; the registry
(`campaign.core.registry`) finds it, so the command line, the content keys and the Snakefile's
helpers need no edit when a phase is added. Declarations import nothing heavy: the Snakefile reads
them when it builds the DAG, and a stage's function is imported only when the stage runs.

Names and paths are said once, here. A stage's `outputs` map each name to its path pattern, in
the stage's wildcards (`{run}`, `{variant}`): `File`, `Folder` (Snakemake's `directory()`) or
`Figure` (a file shown by `snakemake --report`, with its category). Its `inputs` map each name to
where the files come from, never to a path spelled again:

- `From(stage, output)`: that stage's output with this job's wildcards (one fixed file, or the
  same run's file for a per-run consumer);
- `EachRun(stage, output)`: that per-run output of every kept run of the plan;
- `EachJob(stage, output)`: that output of every quantize job (chosen runs x variants);
- `EachGuard(stage, output)`: that output (its path in `{guard}`, and `{run}` where it holds
  one) for every guard task of evaluation.guards (x every kept run);
- `Derived()`: the files the params name, as the stage's `derive_inputs` finds them;
- `Nothing()`: an input the stage accepts and the DAG gives no file.

The rule files take both maps from here (`input: **stage_inputs("index")`, `output:
**stage_outputs("index")`, helpers in workflow/rules/common.smk), so a rule cannot name an input
the stage does not read nor a path another rule spells differently. What stays in the rules is
what only Snakemake needs: checkpoints, log and benchmark paths (with the outputs' wildcards),
resources, priorities. `directory()` and `report()` are applied from the output's kind, because
whether an output is a folder is a fact about the stage (the runner hashes it as a tree), not
about the wiring. `after` holds the files a job waits for but does not read (not passed to the
stage, not hashed): they order the DAG only, e.g. training after the plan table (`ancient`, so a
redone plan does not make trained runs stale).

`final` says whether the stage's outputs are targets of a bare `snakemake` (`rule all`, built
from the registry): True, False, or a function of the params (the track stage, with
tracking.enabled). All of a final stage's outputs are targets; its job is needed either way, so
this lists the files that job writes without adding a job.

A phase also declares what it contributes to what a user reads (`Phase.report`,
`Phase.findings`, `Phase.index`), beside its stages: a report section (title, the function that
renders it, the files it reads), the lines `campaign findings` prints from one of its JSON
reports, and index columns (names, types, the function that reads them per row). The report and
index stages take them from every phase (`Stage.gather`, called by the registry once all phases
are known), so a new phase's section and columns need no edit of report/ or index/.
"""

from __future__ import annotations

import importlib
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class File:
    """An output file at `path` (a pattern in the stage's wildcards)."""

    path: str


@dataclass(frozen=True)
class Folder:
    """An output folder at `path` (Snakemake's `directory()`)."""

    path: str


@dataclass(frozen=True)
class Figure:
    """An output image shown by `snakemake --report` under `category`; its caption is
    workflow/report/<file stem>.rst."""

    path: str
    category: str


Output = File | Folder | Figure


@dataclass(frozen=True)
class From:
    """The output `output` of stage `stage`, with this job's wildcards. `ancient`: its
    modification time never makes the job stale (Snakemake's `ancient()`)."""

    stage: str
    output: str
    ancient: bool = False


@dataclass(frozen=True)
class EachRun:
    """The per-run output `output` of stage `stage` (its path holds `{run}`) for every kept
    run of the plan, in the plan's order."""

    stage: str
    output: str
    # The wildcards it expands (its path holds exactly these; the registry checks it); the
    # consumer's own wildcards stay. Likewise EachLookRun, EachLook and EachJob.
    expands: ClassVar[tuple[str, ...]] = ("run",)


@dataclass(frozen=True)
class EachLookRun:
    """The per-run output `output` of stage `stage` (its path holds `{run}`) for every run an
    adaptive campaign's look evaluates: the plan's kept runs at the first look, then the runs
    the look before it lists (campaign.evaluate.looks)."""

    stage: str
    output: str
    expands: ClassVar[tuple[str, ...]] = ("run",)


@dataclass(frozen=True)
class EachLook:
    """The output `output` of stage `stage` (its path holds `{look}`) at every look of an
    adaptive campaign, in order, the last one's included; none when ablation.adaptive is off."""

    stage: str
    output: str
    expands: ClassVar[tuple[str, ...]] = ("look",)


@dataclass(frozen=True)
class PreviousLook:
    """The output `output` of stage `stage` at the look before this job's (its path holds
    `{look}`); no file at the first look."""

    stage: str
    output: str


@dataclass(frozen=True)
class EachJob:
    """The output `output` of stage `stage` (its path holds `{run}` and `{variant}`) for every
    quantize job: the chosen runs (quantization.runs) x the variants."""

    stage: str
    output: str
    expands: ClassVar[tuple[str, ...]] = ("run", "variant")


@dataclass(frozen=True)
class EachGuard:
    """The output `output` of stage `stage` for every guard task (evaluation.guards; its path
    holds `{guard}`), and for every kept run where the path also holds `{run}`."""

    stage: str
    output: str


@dataclass(frozen=True)
class Derived:
    """The files the stage's params name (data files, an earlier manifest or split, a
    pretrained model folder), as its `derive_inputs` finds them; none is a valid answer."""


@dataclass(frozen=True)
class Nothing:
    """An input the stage accepts (a person may pass it) that the DAG gives no file for."""


Input = (
    From | EachRun | EachLookRun | EachLook | PreviousLook | EachJob | EachGuard | Derived | Nothing
)
# The input kinds that name another stage's output (the registry checks each against its
# producer's declaration), and all of them.
REFERENCES = (From, EachRun, EachLookRun, EachLook, PreviousLook, EachJob, EachGuard)
INPUT_KINDS = (*REFERENCES, Derived, Nothing)


def wildcards_of(pattern: str) -> tuple[str, ...]:
    """The wildcard names of a path pattern, in order: 'results/{run}/{variant}/x' -> (run,
    variant)."""
    return tuple(name for _, name, _, _ in string.Formatter().parse(pattern) if name)


@dataclass(frozen=True)
class Stage:
    name: str
    entry: str  # "campaign.<phase>.<module>:<function>", called with a StageContext
    help: str  # one line for `campaign --help`
    # {name: where its files come from}: each input is one file or a list of files.
    inputs: Mapping[str, Input] = field(hash=False)
    outputs: Mapping[str, Output] = field(hash=False)  # {name: its path pattern and kind}
    spec: Callable[..., Any]  # (params, **wildcards) -> the params subset the stage reads
    libraries: tuple[str, ...] = ()  # whose installed versions are part of the content key
    # The part of the spec that decides the result (hashed into the content key); default: all.
    key_view: Callable[[Any], Any] | None = None
    # Outputs that differ between two identical computations (timings, memory peaks, host
    # facts): stored and materialized like the others, but `campaign reproduce` records them
    # instead of comparing them. Everything else must come out bit for bit.
    volatile: tuple[str, ...] = ()
    # Inputs keyed by a view of their content instead of all of it: (input name,
    # "module:function") with function(path) -> a JSON-able value, e.g. the plan table less
    # its projected-cost columns, which come from timings and differ between two identical
    # campaigns. The stage must read no more of the input than its view holds.
    input_views: tuple[tuple[str, str], ...] = ()
    # "module:function" (spec, root) -> {input name: [paths]} for the inputs the params name
    # (data files, an earlier manifest, a pretrained model folder): the runner hashes exactly
    # these, and refuses --in paths that differ.
    derive_inputs: str | None = None
    # A module with settings(threads) -> dict and pin(settings), for stages that compute with
    # torch: the settings (device type, threads, deterministic algorithms, CUDA versions) are
    # part of the key, and pinned before the stage runs.
    execution: str | None = None
    # Files the job waits for and does not read: not passed to the stage, not hashed.
    after: Mapping[str, Input] = field(default_factory=dict, hash=False)
    # Whether the outputs are targets of a bare `snakemake`: a bool or params -> bool.
    final: bool | Callable[[dict], bool] = False
    # More modules whose code decides the result (a contributed section's renderer).
    code: tuple[str, ...] = ()
    # The job's purpose is an effect outside the store (logging to a tracking server): a store
    # hit runs it again, so the effect shows the results of now, not those of the last miss.
    effect: bool = False
    # "module:function" (stage, phases) -> the stage with what the phases contribute to it
    # (inputs, outputs, code): the report's sections, the index's columns. The registry calls
    # it once every phase is declared.
    gather: str | None = None

    @property
    def wildcards(self) -> tuple[str, ...]:
        """The wildcards of the stage's jobs (those of its output paths), in order."""
        seen: dict[str, None] = {}
        for out in self.outputs.values():
            seen.update(dict.fromkeys(wildcards_of(out.path)))
        return tuple(seen)

    def __post_init__(self) -> None:
        # A tuple of names (the declarations' old form) would pass for names and break the
        # rules: one line naming the stage instead.
        for what, kinds in (
            ("inputs", INPUT_KINDS),
            ("after", (From, EachRun, EachJob)),
            ("outputs", (File, Folder, Figure)),
        ):
            value = getattr(self, what)
            wrong = (
                [value]
                if not isinstance(value, Mapping)
                else [v for v in value.values() if not isinstance(v, kinds)]
            )
            if wrong:
                names = ", ".join(k.__name__ for k in kinds)
                raise TypeError(
                    f"stage '{self.name}': {what} must map each name to one of {names}; "
                    f"got {wrong[0]!r}"
                )

    def is_final(self, params: dict) -> bool:
        return self.final(params) if callable(self.final) else bool(self.final)

    @property
    def command(self) -> str:
        """The `campaign` subcommand that runs the stage (run_spec -> run-spec)."""
        return self.name.replace("_", "-")

    @property
    def module(self) -> str:
        return self.entry.partition(":")[0]

    @property
    def code_modules(self) -> tuple[str, ...]:
        """The modules whose code decides the result: the entry's, and the ones that pin the
        execution (threads, deterministic algorithms), derive the inputs and view them."""
        views = tuple(view.partition(":")[0] for _, view in self.input_views)
        extra = (self.execution, (self.derive_inputs or "").partition(":")[0], *views, *self.code)
        return (self.module, *sorted({m for m in extra if m and m != self.module}))

    def key_params(self, spec: Any) -> Any:
        return spec if self.key_view is None else self.key_view(spec)

    # Every stage's code version holds this module (each phase declares its stages with it), so
    # it resolves its own references rather than import campaign.core.io: an edit of its code
    # changes every store key and retrains every run. The runner uses campaign.core.io.resolve.
    def function(self) -> Callable:
        module_name, _, func_name = self.entry.partition(":")
        return getattr(importlib.import_module(module_name), func_name)


@dataclass(frozen=True)
class ReportSection:
    """A section of the report: `key` (its anchor; its figure is written as figures/<key>.png),
    `title`, `order` (its place: the verdict 0, data 10, ..., the decisions last) and `render`,
    "module:function" (inputs: campaign.report.ReportInputs) -> campaign.core.stage.Section,
    or None where the campaign has nothing for it (the section is left out), reading the report
    stage's inputs by the names `inputs` declares. `figure`: the category
    `snakemake --report` files the section's figure under (None: no figure); its caption is
    workflow/report/<key>.rst."""

    key: str
    title: str
    order: int
    render: str
    inputs: Mapping[str, Input] = field(default_factory=dict, hash=False)
    figure: str | None = None


@dataclass(frozen=True)
class Findings:
    """What `campaign findings` (and the report's verdict) says from a phase's JSON reports:
    `describe`, "module:function" (first, *rest) -> list[str], called with each file of `reads`
    read as a dict, in order: the first must exist (else no lines), the others are None when
    absent. `reads`: {the report stage's input name: a fixed file}."""

    reads: Mapping[str, From] = field(hash=False)
    describe: str


@dataclass(frozen=True)
class IndexColumns:
    """Columns of the experiment index: `columns` ((name, Arrow type alias) in order, after
    the index's own) and `read`, "module:function" (inputs: {name: [paths]}, rows: list of
    the index's rows, each with `name`, `kind`, `run`, `variant`) -> one {column: value} per
    row, in order (a column a row lacks is null). `inputs`: the index stage's inputs it reads."""

    columns: tuple[tuple[str, str], ...]
    read: str
    inputs: Mapping[str, Input] = field(default_factory=dict, hash=False)


@dataclass
class Section:
    """One rendered section of the report: sentences, tables and (for most) the data of one
    figure. The report sets `key` and `title` from its ReportSection, the one place they are
    said: a renderer returns `Section(lines, tables, figure)`."""

    lines: list[str] = field(default_factory=list)
    tables: list[tuple[str, Any]] = field(default_factory=list)  # (caption, pandas DataFrame)
    figure: tuple | None = None  # (plot function name, arguments) or None
    pre: str | None = None  # a block of text shown as it is (the budget's summary)
    key: str = ""  # the anchor in the HTML page, and the figure's output name after "fig_"
    title: str = ""


@dataclass(frozen=True)
class Phase:
    """One phase of the DAG. `order` places it (data 10, preflight 20, plan 30, train 40, ...).

    check_params(params) raises CampaignError for rules the schema cannot state (a sum of
    fractions, a key that only makes sense with another); it runs after the schema check.
    """

    name: str
    order: int
    stages: tuple[Stage, ...] = ()
    check_params: Callable[[dict], None] | None = None
    report: tuple[ReportSection, ...] = ()  # its sections of the report
    findings: tuple[Findings, ...] = ()  # what `campaign findings` says from its reports
    index: tuple[IndexColumns, ...] = ()  # its columns of the experiment index
