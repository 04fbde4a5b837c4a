"""Ending a stage's process without the interpreter's teardown.

Once a stage has returned, every output is written and closed; what the interpreter then does
on its way out is wait for non-daemon threads, run the exit handlers, flush the streams, and
finalize every module and object: about 2 s of CPU after torch and transformers are imported,
at the end of every training, quantize and preflight job (benchmarks/bench_demo.py, "exit").
`exit_without_teardown` does the first three and skips the last.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

BROKEN_PIPE_EXIT = 120  # what CPython exits with when flushing stdout fails at exit


def _flush_streams(code: int) -> int:
    """Flush Python's streams, then C's (an extension's printf into a log file or pipe is
    block-buffered); `code`, or BROKEN_PIPE_EXIT for a successful process whose output could
    not be written (a reader that went away, as CPython reports it)."""
    for stream in dict.fromkeys((sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)):
        if stream is None:
            continue
        try:
            stream.flush()
        except Exception:
            if code == 0:
                code = BROKEN_PIPE_EXIT
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to name (not POSIX)
        pass
    return code


def exit_without_teardown(code: int | None) -> NoReturn:
    """End the process with `code` as sys.exit would, less the finalization of modules and
    objects: non-daemon threads are joined (and executors shut down), the exit handlers run
    (logging, multiprocessing, temporary folders, MLflow, coverage), the streams are flushed,
    then os._exit. Under a profiler or tracer (`python -m cProfile -m campaign ...`), which
    writes its results after this returns, and for a code that is not a number: sys.exit."""
    import atexit
    import threading

    code = 0 if code is None else code
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    watched = sys.getprofile() is not None or sys.gettrace() is not None
    if run_handlers is None or not isinstance(code, int) or watched:
        sys.exit(code)
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    run_handlers()
    os._exit(_flush_streams(code))
