"""Tests for campaign.tools.backup (`campaign backup` / `campaign restore`): an encrypted
round trip bit for bit (contents, modification times, hard links, modes), a wrong key failing
in one line with nothing replaced, and, end to end, backup -> delete -> restore -> `snakemake
-n` with nothing to do."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from campaign.cli import main
from campaign.core.hashing import hash_file
from campaign.core.store import Store
from conftest import campaign, planned_jobs, snakemake

PARAMS = Path(__file__).parents[1] / "fixtures" / "tiny_params.yaml"


def snapshot(root: Path) -> dict[str, tuple]:
    """path -> (hash, mtime_ns, mode, inode group) of every file and folder under root."""
    out, inodes = {}, {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(("backups", "other", ".restore-", "key")):
            continue
        st = p.stat()
        group = inodes.setdefault(st.st_ino, rel) if p.is_file() else None
        digest = hash_file(p) if p.is_file() else None
        out[rel] = (digest, st.st_mtime_ns if p.is_file() else None, st.st_mode, group)
    return out


def fake_project(root: Path) -> None:
    (root / "results" / "data").mkdir(parents=True)
    (root / "state" / "store" / "ab").mkdir(parents=True)
    (root / "logs").mkdir()
    store_file = root / "state" / "store" / "ab" / "out.bin"
    store_file.write_bytes(os.urandom(5000))
    os.link(store_file, root / "results" / "data" / "out.bin")  # results are store hard links
    (root / "logs" / "x.log").write_text("log\n")
    (root / ".snakemake" / "metadata").mkdir(parents=True)
    (root / ".snakemake" / "metadata" / "cmVzdWx0cw==").write_text("{}")
    for p in root.rglob("*"):
        os.chmod(p, 0o700 if p.is_dir() else 0o600)
        if p.is_file():
            os.utime(p, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))


def cli(capsys, root: Path, *argv: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(root)
    try:
        code = main([*argv, "--params", str(PARAMS), "--state-dir", "state"])
    finally:
        os.chdir(cwd)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_round_trip_is_bit_for_bit(capsys, tmp_path) -> None:
    root = tmp_path / "p"
    fake_project(root)
    before = snapshot(root)
    code, out, err = cli(capsys, root, "backup", "--to", "backups", "--key-file", "key",
                         "--new-key")  # fmt: skip
    assert code == 0, err
    archive = next((root / "backups").glob("campaign-backup-*.tar.age"))
    assert b"out.bin" not in archive.read_bytes()  # encrypted, names too
    for name in ("results", "logs", "state", ".snakemake"):
        os.system(f"rm -rf {root / name}")
    code, out, err = cli(capsys, root, "restore", str(archive), "--key-file", "key")
    assert code == 0, err
    assert snapshot(root) == before
    results, store = root / "results" / "data" / "out.bin", root / "state" / "store" / "ab"
    assert results.stat().st_ino == (store / "out.bin").stat().st_ino


def test_wrong_key_fails_in_one_line_and_replaces_nothing(capsys, tmp_path) -> None:
    root = tmp_path / "p"
    fake_project(root)
    code, _, err = cli(capsys, root, "backup", "--to", "backups", "--key-file", "key",
                       "--new-key")  # fmt: skip
    assert code == 0, err
    archive = next((root / "backups").glob("*.tar.age"))
    before = snapshot(root)
    code, _, err = cli(capsys, root, "backup", "--to", "other", "--key-file", "key2", "--new-key")
    code, _, err = cli(capsys, root, "restore", str(archive), "--key-file", "key2")
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "the key does not decrypt it" in lines[0], err
    assert snapshot(root) == before
    assert not list(root.glob(".restore-*"))


def test_key_from_the_environment_and_never_from_params(capsys, tmp_path, monkeypatch) -> None:
    root = tmp_path / "p"
    fake_project(root)
    from pyrage import x25519

    monkeypatch.setenv("CAMPAIGN_BACKUP_KEY", str(x25519.Identity.generate()))
    code, _, err = cli(capsys, root, "backup", "--to", "backups")
    assert code == 0, err
    monkeypatch.delenv("CAMPAIGN_BACKUP_KEY")
    code, _, err = cli(capsys, root, "backup", "--to", "backups")
    assert code != 0 and "pass --key-file FILE or set $CAMPAIGN_BACKUP_KEY" in err


@pytest.mark.slow
def test_backup_delete_restore_then_nothing_to_do(finished_project) -> None:
    project = finished_project  # the tiny campaign, as test_e2e runs it
    campaign(project, "backup", "--to", "backups", "--key-file", "key", "--new-key")
    archive = next((project / "backups").glob("*.tar.age"))
    for name in ("results", ".campaign", "logs"):
        os.system(f"rm -rf {project / name}")
    assert planned_jobs(snakemake(project, "-n")) != []  # deleted: all to do again
    campaign(project, "restore", str(archive), "--key-file", "key")
    again = snakemake(project, "-n")
    assert planned_jobs(again) == [], again.stdout[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr


MARK = b"PLAINTEXT-CANARY-7f3a"  # in every block of the project's data, never in ciphertext


def test_kill_9_mid_backup_leaves_no_plaintext_and_the_next_backup_cleans_up(
    capsys, tmp_path
) -> None:
    """A real `campaign backup` killed with SIGKILL while it writes: nothing under the
    destination holds a byte of plaintext (the canary of every data block), the next backup
    removes the killed one's folder, and its archive restores bit for bit."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import env

    root = tmp_path / "p"
    fake_project(root)
    block = MARK + os.urandom(1 << 20)
    big = root / "state" / "store" / "ab" / "big.bin"
    with big.open("wb") as f:
        for _ in range(64):  # 64 MiB: encrypting it takes long enough to be caught mid-way
            f.write(block)
    os.chmod(big, 0o600)
    before = snapshot(root)
    cli(capsys, root, "backup", "--to", "other", "--key-file", "key", "--new-key")
    e = env()
    e["PYTHONPATH"] = str(Path(__file__).parents[2] / "workflow")
    cmd = [sys.executable, "-m", "campaign", "backup", "--to", "backups", "--key-file", "key",
           "--params", str(PARAMS), "--state-dir", "state"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=root, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        partial = [p for p in (root / "backups").glob(".backup-*/*") if p.stat().st_size > 1 << 22]
        if partial:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, f"the backup ended before the kill: {err[-2000:]}"
    left = [p for p in (root / "backups").rglob("*") if p.is_file()]
    assert left and all(p.parent.name.startswith(".backup-") for p in left)  # a partial archive
    for p in left:
        plaintext = MARK in p.read_bytes()
        assert not plaintext, f"plaintext on disk after a kill: {p}"
        assert p.stat().st_mode & 0o077 == 0

    code, _, err = cli(capsys, root, "backup", "--to", "backups", "--key-file", "key")
    assert code == 0, err
    assert [p.name for p in (root / "backups").iterdir()] == [
        next((root / "backups").glob("campaign-backup-*.tar.age")).name
    ]  # the killed backup's folder is gone; only the new archive remains
    archive = next((root / "backups").glob("*.tar.age"))
    plaintext = MARK in archive.read_bytes()
    assert not plaintext
    for name in ("results", "logs", "state", ".snakemake"):
        os.system(f"rm -rf {root / name}")
    code, _, err = cli(capsys, root, "restore", str(archive), "--key-file", "key")
    assert code == 0, err
    assert snapshot(root) == before


def test_restore_replaces_only_what_the_store_made(capsys, tmp_path) -> None:
    """A user's files in the state folder (beside the store's folders and inside one) are not
    the store's: restore puts the archive's entries back and leaves those where they are, as
    they are now; an entry made after the backup goes, as restore replaces what the store made."""
    root = tmp_path / "p"
    fake_project(root)
    state = root / "state"
    Store(state).ensure()  # a state folder the store has marked as its own
    kept, later = "a" * 64, "b" * 64
    (state / "store" / kept).mkdir()
    (state / "store" / kept / "entry.json").write_text('{"kept": 1}')
    (state / "photos").mkdir()
    (state / "photos" / "cat.jpg").write_bytes(b"cat at backup time")
    code, _, err = cli(capsys, root, "backup", "--to", "backups", "--key-file", "key",
                       "--new-key")  # fmt: skip
    assert code == 0, err
    archive = next((root / "backups").glob("*.tar.age"))
    os.system(f"rm -rf {state / 'store' / kept}")
    (state / "store" / later).mkdir()
    (state / "photos" / "cat.jpg").write_bytes(b"cat edited since")
    (state / "notes.txt").write_text("mine\n")
    (state / "store" / "mine").mkdir()
    (state / "store" / "mine" / "a.txt").write_text("also mine\n")
    (state / "jobs").mkdir(exist_ok=True)
    (state / "jobs" / "my-notes.txt").write_text("mine too\n")  # beside the job records

    code, out, err = cli(capsys, root, "restore", str(archive), "--key-file", "key")
    assert code == 0, err
    assert (state / "store" / kept / "entry.json").read_text() == '{"kept": 1}'
    assert not (state / "store" / later).exists()
    assert (state / "photos" / "cat.jpg").read_bytes() == b"cat edited since"
    assert (state / "notes.txt").read_text() == "mine\n"
    assert (state / "store" / "mine" / "a.txt").read_text() == "also mine\n"
    assert (state / "jobs" / "my-notes.txt").read_text() == "mine too\n"
    assert (state / "store" / "ab" / "out.bin").is_file()  # the archive's, where none is now
    assert not list(root.glob(".restore-*"))


def test_restore_refuses_a_store_folder_on_another_disk_and_replaces_nothing(
    capsys, tmp_path
) -> None:
    """Restore moves by rename: a store folder linked to another file system (here the
    shared-memory one) would fail halfway and lose what had moved. It is refused in one line
    before anything moves, and the state folder is as it was."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system to link the store to")
    root = tmp_path / "p"
    fake_project(root)
    state = root / "state"
    Store(state).ensure()
    (state / "store" / ("a" * 64)).mkdir()
    (state / "store" / ("a" * 64) / "entry.json").write_text('{"kept": 1}')
    code, _, err = cli(capsys, root, "backup", "--to", "backups", "--key-file", "key",
                       "--new-key")  # fmt: skip
    assert code == 0, err
    archive = next((root / "backups").glob("*.tar.age"))
    elsewhere = Path(tempfile.mkdtemp(dir=shm))
    try:
        entries = state / "store"
        os.system(f"cp -a {entries}/. {elsewhere}/ && rm -rf {entries}")
        entries.symlink_to(elsewhere)
        before = sorted(str(p.relative_to(state)) for p in state.rglob("*"))
        code, _, err = cli(capsys, root, "restore", str(archive), "--key-file", "key")
        assert code != 0 and "another file system" in err and len(err.strip().splitlines()) == 1
        assert sorted(str(p.relative_to(state)) for p in state.rglob("*")) == before
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
