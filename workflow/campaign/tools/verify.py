"""`campaign verify`: re-hash every store entry and report the corrupt ones."""

from __future__ import annotations

from campaign.core.store import Store


def verify_store(store: Store, remove: bool = False) -> list[str]:
    """Print one line per entry (ok / CORRUPT with the file); return the corrupt keys."""
    bad = []
    keys = store.keys()
    for key in keys:
        entry = store.read_entry(key)
        problems = store.problems(entry)
        stage = entry.meta.get("stage", "?")
        if problems:
            bad.append(key)
            for problem in problems:
                print(f"CORRUPT  {stage:<12} {problem}")
            if remove:
                store.quarantine(key)
                store.log_event("corrupt", key, stage, problems=problems[:5])
        else:
            size = sum(o["bytes"] for o in entry.meta["outputs"].values())
            print(
                f"ok       {stage:<12} {key}  {len(entry.meta['outputs'])} output(s), {size} bytes"
            )
    verdict = f"{len(keys) - len(bad)} of {len(keys)} entries sound"
    if bad:
        verdict += f"; {len(bad)} corrupt" + (
            " (moved out of the store)"
            if remove
            else " (run with --remove, or let the next use recompute)"
        )
    print(verdict)
    return bad
