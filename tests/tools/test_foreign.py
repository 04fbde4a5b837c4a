"""The state folder holds only what the store made: gc, `verify --remove` and gc's retention
remove entries, work folders, staging folders and lock files named by a content key, never a
user's file or folder under `campaign.state_dir` (they are listed as left alone); a state folder
that is `/`, the home folder, a file or a folder of something else is refused in one line by
`validate` and every command that opens the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_maintenance import key_of, make_entry

from campaign.cli import main
from campaign.core.store import Store
from campaign.tools.gc import collect_garbage
from campaign.tools.verify import verify_store
from conftest import FIXTURES

RETENTION = {"checkpoints_days": 0, "unreferenced_days": 0, "raw_data": "referenced"}


def plant_foreign(state: Path) -> dict[Path, bytes]:
    """A user's files where the store keeps its own: path -> bytes it must still hold."""
    planted = {
        state / "work" / "main" / "thesis.tex": b"chapter 1",  # the H/work/main
        state / "store" / "photos" / "cat.jpg": b"\xff\xd8 a cat",
        state / "store" / ("ab" * 31) / "entry.json": b"{}",  # key-like, but too short
        state / "tmp" / "notes.txt": b"notes",
        state / "tmp" / "commit-draft" / "x": b"a folder named like a commit, without a key",
        state / "locks" / "mine.lock": b"",
    }
    for path, data in planted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return planted


def assert_untouched(planted: dict[Path, bytes]) -> None:
    for path, data in planted.items():
        assert path.read_bytes() == data, path


@pytest.mark.parametrize("retention", [None, RETENTION])
def test_gc_removes_only_what_the_store_made_and_lists_the_rest(tmp_path, capsys, retention):
    store = Store(tmp_path / "state")
    garbage = make_entry(store, "garbage")
    (store.work_dir(key_of("orphan")) / "ckpt-5").write_bytes(b"x")
    planted = plant_foreign(store.root)
    collect_garbage(store, set(), dry_run=False, retention=retention)
    assert (
        store.keys() == [] and store.work_keys() == [] and garbage not in os.listdir(store.entries)
    )
    assert_untouched(planted)
    out = capsys.readouterr().out
    assert "removed 1 entries" in out and "1 work folders" in out
    for name in (
        "work/main",
        "store/photos",
        "tmp/notes.txt",
        "tmp/commit-draft",
        "locks/mine.lock",
    ):
        assert f"left alone    {store.root / name}  (not made by the store)" in out, out
    assert "left alone 6 item(s) under" in out


def test_verify_remove_leaves_foreign_folders_and_lists_them(tmp_path, capsys):
    store = Store(tmp_path / "state")
    key = make_entry(store, "corrupt")
    stored = store.read_entry(key).output_path("out")
    os.chmod(stored, 0o600)
    stored.write_bytes(b"flipped")
    planted = plant_foreign(store.root)
    assert verify_store(store, remove=True) == [key]
    assert store.keys() == [] and len(store.quarantined()) == 1
    assert_untouched(planted)
    assert "left alone 6 item(s)" in capsys.readouterr().out


@pytest.mark.slow
def test_gc_through_the_command_leaves_a_users_work_folder(tmp_path, capsys, monkeypatch):
    """The issue's case: `state_dir: H` with a folder `H/work/main`; gc --force printed "removed
    work folder main" and deleted it. Now the command lists it and removes only the store's."""
    state = tmp_path / "H"
    store = Store(state)
    make_entry(store, "garbage")
    thesis = state / "work" / "main" / "thesis.tex"
    thesis.parent.mkdir(parents=True)
    thesis.write_text("chapter 1")
    assert main(["gc", "--params", str(FIXTURES / "tiny_params.yaml"), "--state-dir", str(state),
                 "--force"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert thesis.read_text() == "chapter 1" and store.keys() == []
    assert "removed work folder" not in out
    assert f"left alone    {state / 'work' / 'main'}  (not made by the store)" in out


def state_params(tmp_path: Path, state_dir: str) -> Path:
    text = (FIXTURES / "tiny_params.yaml").read_text(encoding="utf-8")
    assert "  state_dir: .campaign" in text
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("  state_dir: .campaign", f"  state_dir: '{state_dir}'"))
    return path


def bad_state_dirs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (state_dir, what the one-line error says)."""
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "params.yaml").write_text("x: 1")
    return {
        "root": ("/", "is the file system's root"),
        "home": (str(Path.home()), "is the home folder"),
        "file": (str(tmp_path / "a_file"), "is a file, not a folder"),
        "foreign": (
            str(tmp_path / "project"),
            "is not a campaign state folder (it holds params.yaml)",
        ),
    }


@pytest.mark.parametrize("case", ["root", "home", "file", "foreign"])
@pytest.mark.parametrize("command", ["validate", "gc", "verify", "status"])
def test_a_state_dir_that_is_not_a_state_folder_is_refused(tmp_path, capsys, case, command):
    state_dir, says = bad_state_dirs(tmp_path)[case]
    params = state_params(tmp_path, state_dir)
    before = sorted(os.listdir(state_dir)) if os.path.isdir(state_dir) else None
    assert main([command, "--params", str(params)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"campaign.state_dir: {state_dir} {says}" in err, err
    if before is not None:
        assert sorted(os.listdir(state_dir)) == before  # nothing created there


def test_the_state_dir_flag_is_checked_too(tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a folder")
    argv = ["verify", "--state-dir", str(tmp_path / "a_file")]
    assert main(argv) == 2
    assert f"--state-dir: {tmp_path / 'a_file'} is a file" in capsys.readouterr().err


def test_a_state_folder_the_store_made_is_accepted(tmp_path, capsys):
    store = Store(tmp_path / "state")
    make_entry(store, "an entry")
    store.log_event("hit", key_of("an entry"), "manifest")
    params = state_params(tmp_path, str(store.root))
    assert main(["validate", "--params", str(params)]) == 0
    assert main(["verify", "--params", str(params)]) == 0
    assert "1 of 1 entries sound" in capsys.readouterr().out


def test_a_state_folder_the_store_marked_keeps_its_extras(tmp_path, capsys):
    """Once the store has made its layout (and its CAMPAIGN_STATE mark), a folder a tool puts
    beside it (a benchmark's cache) does not make the folder foreign: gc lists it, leaves it."""
    store = Store(tmp_path / "state")
    store.ensure()
    (store.root / "bench_quant").mkdir()
    (store.root / "bench_quant" / "cached.json").write_text("{}")
    params = state_params(tmp_path, str(store.root))
    assert main(["validate", "--params", str(params)]) == 0
    collect_garbage(store, set(), dry_run=False)
    assert (store.root / "bench_quant" / "cached.json").exists()
    assert f"left alone    {store.root / 'bench_quant'}" in capsys.readouterr().out
    # The same folder without the mark is refused: it is not recognisably a campaign's.
    (store.root / "CAMPAIGN_STATE").unlink()
    assert main(["validate", "--params", str(params)]) == 2
    assert "is not a campaign state folder (it holds bench_quant)" in capsys.readouterr().err
    # A state folder from before the mark: its event log says the store made it.
    store.log_event("hit", "ab" * 32, "manifest")
    assert main(["validate", "--params", str(params)]) == 0
