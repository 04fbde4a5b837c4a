"""`campaign verify`: re-hash every store entry and report the corrupt ones."""

from __future__ import annotations

from campaign.core.store import Store


def say_left_alone(store: Store) -> None:
    """One line per thing under the state folder the store did not make: never removed."""
    foreign = store.foreign()
    for name in foreign:
        print(f"left alone    {store.root / name}  (not made by the store)")
    if foreign:
        print(
            f"left alone {len(foreign)} item(s) under {store.root} that the store did not make; "
            "move them out of the state folder"
        )


def _move_out(store: Store, key: str, stage: str) -> str:
    """Quarantine a corrupt entry under its key's lock: "moved", "locked" or "sound now".

    A key whose lock a running job holds is skipped, not waited on (the job may be reading the
    entry; its own lookup quarantines a corrupt one). Under the lock the entry is checked again:
    a job may have replaced it since it was hashed.
    """
    with store.try_lock(key) as held:
        if not held:
            return "locked"
        entry = store.read_entry(key)
        if entry is None:
            return "moved"  # gone meanwhile: nothing left to move
        problems = store.problems(entry)
        if not problems:
            return "sound now"
        store.quarantine(key)
        store.log_event("corrupt", key, stage, problems=problems[:5])
        return "moved"


def verify_store(store: Store, remove: bool = False) -> list[str]:
    """Print one line per entry (ok / CORRUPT with the file); return the corrupt keys.

    With `remove`, corrupt entries move out of the store, except those a running job has locked.
    """
    bad, skipped = [], []
    keys = store.keys()
    for key in keys:
        entry = store.read_entry(key)
        if entry is None:
            continue  # removed since it was listed (gc, or a job's quarantine)
        problems = store.problems(entry)
        stage = entry.meta.get("stage", "?")
        if not problems:
            size = sum(o["bytes"] for o in entry.meta["outputs"].values())
            print(
                f"ok       {stage:<12} {key}  {len(entry.meta['outputs'])} output(s), {size} bytes"
            )
            continue
        for problem in problems:
            print(f"CORRUPT  {stage:<12} {problem}")
        outcome = _move_out(store, key, stage) if remove else "kept"
        if outcome == "sound now":
            print(f"ok       {stage:<12} {key}  replaced by a sound entry while being checked")
            continue
        bad.append(key)
        if outcome == "locked":
            skipped.append(key)
            print(f"skipped  {stage:<12} {key}  locked by a running job; not moved")
    verdict = f"{len(keys) - len(bad)} of {len(keys)} entries sound"
    if bad:
        moved = len(bad) - len(skipped)
        verdict += f"; {len(bad)} corrupt" + (
            f" ({moved} moved out of the store"
            + (f", {len(skipped)} skipped: locked by a running job)" if skipped else ")")
            if remove
            else " (run with --remove, or let the next use recompute)"
        )
    print(verdict)
    say_left_alone(store)
    return bad
