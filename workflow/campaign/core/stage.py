"""What a phase declares: its stages (name, entry, inputs, outputs, params subset) and checks.

A phase is a subpackage of `campaign` whose `__init__` defines `PHASE = Phase(...)`; the registry
(`campaign.core.registry`) finds it, so the command line, the content keys and the Snakefile's
helpers need no edit when a phase is added. Declarations import nothing heavy: the Snakefile reads
them when it builds the DAG, and a stage's function is imported only when the stage runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Stage:
    name: str
    entry: str  # "campaign.<phase>.<module>:<function>", called with a StageContext
    help: str  # one line for `campaign --help`
    inputs: tuple[str, ...]  # logical input names (each one file or a list of files)
    outputs: tuple[str, ...]  # logical output names
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
        extra = (self.execution, (self.derive_inputs or "").partition(":")[0], *views)
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
class Phase:
    """One phase of the DAG. `order` places it (data 10, preflight 20, plan 30, train 40, ...).

    check_params(params) raises CampaignError for rules the schema cannot state (a sum of
    fractions, a key that only makes sense with another); it runs after the schema check.
    """

    name: str
    order: int
    stages: tuple[Stage, ...] = ()
    check_params: Callable[[dict], None] | None = None
