"""Phase code calls a task's module (campaign.core.tasks.module_of) instead of branching on the
task's name: the task-name literals left outside campaign/tasks/ and core/tasks.py are few and
listed here, so a new one is a choice made in review, not a drift."""

from __future__ import annotations

from campaign.tools.task_branches import branches, python_hits, task_words

# The places phase code may still name a task, each with its reason.
ALLOWED = 5


def test_phase_code_names_tasks_in_at_most_five_places():
    found = branches()
    listed = "\n".join(f"workflow/{file}:{line}" for file, line in found)
    assert len(found) <= ALLOWED, f"{len(found)} task-name literals in phase code:\n{listed}"


def test_the_counter_sees_a_branch_and_skips_docstrings_and_comments(tmp_path):
    module = tmp_path / "phase.py"
    module.write_text(
        '"""Scores causal_lm and "generation" runs."""\n'
        "def f(task):\n"
        '    """For "sequence_classification"."""\n'
        '    # "causal_lm" is handled below\n'
        '    if task == "causal_lm":\n'
        "        return 1\n"
        '    return {"generated_text": 2}\n',
        encoding="utf-8",
    )
    assert python_hits(module, task_words()) == [5, 7]
