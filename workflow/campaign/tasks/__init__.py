"""The task modules: one module per task (generation.py: prompt -> response, judged on what the
model generates), called by the phases through the table in campaign.core.tasks (which phases
import without importing a task's heavy code)."""

from campaign.core.tasks import TASKS, Task, get, trainer_module
from campaign.tasks import generation

__all__ = ["TASKS", "Task", "generation", "get", "trainer_module"]
