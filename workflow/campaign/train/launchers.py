"""A train.command's launcher: the argv a job runs (the campaign's own interpreter and
launchers, "{devices}" as the run's device count), and the refusals of a process count the plan,
the budget and the key do not count (a count written in argv, a launcher inside srun or mpirun,
more than one device with no launcher)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

from campaign.core.errors import CampaignError


class WrittenCommand(Protocol):
    """What of train.command these read (command.Command): its argv as written."""

    argv: tuple[str, ...]


# argv[0] naming these runs the campaign's own interpreter (a job's PATH may hold another).
OWN_PYTHON = ("python", "python3")
# argv[0] naming one of these launchers runs the campaign environment's own where it has one
# (beside its interpreter): the packages whose versions the key holds are that environment's.
OWN_LAUNCHERS = ("torchrun", "accelerate", "deepspeed")
# What starts one process per device: train.devices > 1 needs one of these at the head of argv
# (the campaign starts the command once; "{devices}" in argv becomes the run's device count).
LAUNCHERS = ("torchrun", "accelerate", "deepspeed", "srun", "mpirun", "torch.distributed.run")
DEVICES_SLOT = "{devices}"
# The launchers' process-count options (torchrun, accelerate, deepspeed, srun): with a number
# written in argv the run would train on a count the plan, budget and key do not know.
COUNT_OPTIONS = ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num-processes",
                 "--num_gpus", "--num-gpus", "--ntasks", "--ntasks-per-node",
                 "-n", "-np", "--np")  # fmt: skip
# Launchers that, given no count, start the allocation's tasks: the SLURM profile allocates
# train.devices of them (the contract helper checks the size they announce).
ALLOCATION_LAUNCHERS = ("srun", "mpirun")


def command_argv(command: WrittenCommand, devices: int) -> list[str]:
    """The argv the job runs: python as the job's own interpreter, "{devices}" as the run's
    device count. More than one device needs a launcher at the head of argv: the campaign
    starts the command once and launches no process per device itself. A launcher takes its
    process count from "{devices}", at any count: a number written in argv would train on
    processes the plan, the budget and the key do not count."""
    check_count(command, devices)
    argv = [a.replace(DEVICES_SLOT, str(devices)) for a in command.argv]
    if argv[0] in OWN_PYTHON:  # the interpreter the job runs in, whatever PATH says
        argv[0] = sys.executable
    own = Path(sys.executable).parent / argv[0]
    if argv[0] in OWN_LAUNCHERS and own.is_file():
        argv[0] = str(own)
    if devices > 1 and launcher_of(command) is None:
        raise CampaignError(
            f"train.devices {devices}: train.command's argv ({' '.join(command.argv)}) starts "
            f'no launcher; start it with one of {", ".join(LAUNCHERS[:-1])} ("{DEVICES_SLOT}" '
            "in argv is replaced by the count), or set train.devices 1"
        )
    return argv


def launcher_of(command: WrittenCommand) -> str | None:
    """The launcher at the head of argv (LAUNCHERS), or None."""
    return next((Path(a).name for a in command.argv[:3] if Path(a).name in LAUNCHERS), None)


def launched_inside(args: list[str]) -> str | None:
    """The launcher srun or mpirun would start (args: what follows it), or None. The program is
    the first argument that is no option and no option's value (a single-dash option without
    "=" takes the next argument: `-J name`, `-x VAR`, `-np 2`; so does a count option); for a
    Python interpreter, the module its -m names (`python -m torch.distributed.run`, `python -m
    accelerate.commands.launch`). The program's own arguments are its own."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        valued = "=" not in args[i] and (not args[i].startswith("--") or args[i] in COUNT_OPTIONS)
        i += 2 if valued else 1
    if i >= len(args):
        return None
    program = Path(args[i]).name
    if program in LAUNCHERS:
        return program
    if not program.startswith("python"):
        return None
    for at in range(i + 1, len(args) - 1):  # the interpreter's options, up to its script
        if not args[at].startswith("-"):
            return None
        if args[at] == "-m":
            module = args[at + 1]
            return next((module for m in LAUNCHERS if module == m or module.startswith(f"{m}.")),
                        None)  # fmt: skip
    return None


def check_count(command: WrittenCommand, devices: int) -> None:
    """A launcher at the head of argv with its process count not "{devices}": one line."""
    argv = command.argv
    launcher = launcher_of(command)
    if launcher is None:
        return
    written = " ".join(argv)
    start = next(i for i, a in enumerate(argv) if Path(a).name == launcher) + 1
    inner = launched_inside(argv[start:]) if launcher in ALLOCATION_LAUNCHERS else None
    if inner is not None:
        # srun and mpirun start the allocation's train.devices tasks: a launcher inside each
        # would make train.devices worlds of its own, every one training the same folder.
        raise CampaignError(
            f"train.command: argv ({written}) starts {launcher} and then {inner}: {launcher} "
            f"starts train.devices ({devices}) tasks, each its own {inner} world training the "
            "same folder; use one launcher"
        )
    # The launcher's own options only: they end at the script (a .py file or an interpreter);
    # what follows is the script's, whose --num_processes is not the launcher's.
    end = next(
        (i for i in range(start, len(argv))
         if argv[i].endswith(".py") or Path(argv[i]).name.startswith("python")),
        len(argv),
    )  # fmt: skip
    for i in range(start, end):
        arg = argv[i]
        option, eq, value = arg.partition("=")
        if option in COUNT_OPTIONS:
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if value != DEVICES_SLOT:
                raise CampaignError(
                    f"train.command: argv ({written}) sets {option} {value}, a process count "
                    f"train.devices ({devices}) does not know; write {option}={DEVICES_SLOT}"
                )
    if launcher not in ALLOCATION_LAUNCHERS and not any(DEVICES_SLOT in a for a in argv):
        raise CampaignError(
            f'train.command: argv ({written}) starts {launcher} without "{DEVICES_SLOT}": its '
            f"process count must be train.devices ({devices}), which the plan, budget and key "
            f"count; pass it as {DEVICES_SLOT} (e.g. --nproc_per_node={DEVICES_SLOT})"
        )
