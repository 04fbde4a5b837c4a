"""Public names of a phase package, imported on first use.

A phase's `__init__` lists what other phases may use as `_PUBLIC = {name: module}` and calls
`exports(__name__, _PUBLIC)`. Importing the package stays cheap (the Snakefile imports every
phase's declarations when it builds the DAG); `from campaign.train import Trainer` imports
`campaign.train.loop` only then. The literal `_PUBLIC` map is also what the code-version closure
(`campaign.core.code`) and the layout test read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def exports(package: str, public: dict[str, str]) -> tuple[Callable, Callable]:
    """(`__getattr__`, `__dir__`) for a package module: `name` resolves to `<module>.name`."""

    def __getattr__(name: str):
        target = public.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{target}")
        return getattr(module, name)

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__
