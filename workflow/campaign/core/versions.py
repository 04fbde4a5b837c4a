"""Installed distributions' versions, as a stage's key, a run manifest and a train.command's
identity record them. Standard library only: the training stage's code version holds this module
(and nothing of the readers in campaign.core.io)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    """{distribution: its installed version, or "absent"}: a stage's libraries (part of its
    key), a train.command's packages (campaign.train.command), a run manifest's libraries
    (campaign.train.stage)."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out
