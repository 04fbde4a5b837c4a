"""The task modules: one module (or package) per task, each holding its TaskModule as `TASK`
(campaign.core.tasks), which every phase calls for what differs per task: sequence_classification,
causal_lm (the label tasks, with what they share in labels.py) and generation (prompt -> response,
judged on what the model generates)."""

from campaign.core.tasks import TASKS, Task, TaskModule, get, module_of

__all__ = ["TASKS", "Task", "TaskModule", "get", "module_of"]
