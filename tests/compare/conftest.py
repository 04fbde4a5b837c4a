"""Real lm-evaluation-harness and Inspect logs, written once and kept between test sessions
under pytest's temporary root, keyed by the kit's code and the tools' versions (logkit.build
takes minutes on a loaded CPU)."""

from __future__ import annotations

import hashlib
import os
import shutil
from importlib.metadata import version
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _key() -> str:
    h = hashlib.sha256()
    for p in (HERE / "logkit.py", HERE.parent / "genkit.py"):
        h.update(p.read_bytes())
    for pkg in ("lm-eval", "inspect-ai", "transformers", "torch"):
        h.update(version(pkg).encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def logs(tmp_path_factory) -> dict:
    """logkit.build's folders: lm_eval/{a0,a1,b0,b1}, ppl/{a0,b0}, oneshot, inspect logs."""
    import logkit

    root = Path(tmp_path_factory.getbasetemp()).parent / f"compare-logs-{_key()}"
    if not (root / "DONE").is_file():
        work = Path(tmp_path_factory.mktemp("compare-logs"))
        logkit.build(work)
        (work / "DONE").write_text("")
        shutil.rmtree(root, ignore_errors=True)
        try:
            os.rename(work, root)
        except OSError:  # another session finished first: use its copy
            pass
    return logkit.layout(root)
