"""A call with a time limit: run a function in a fresh process and kill it when time is up.

For paths that can take minutes to compile (TVM's unrolled Relax import of a long
recurrence): a thread cannot be stopped inside TVM's C++, a process can. The child is
started with ``spawn``: it imports the caller's modules afresh (no forked TVM or OpenMP
thread pools) and inherits the environment, so TVM_NUM_THREADS set before the call holds.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")


class ChildFailed(RuntimeError):
    """The function raised in the child, or the child died; the message says which."""


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        result = (True, fn(*args))
    except BaseException as e:  # reported to the parent, whatever it is
        lines = traceback.format_exception_only(type(e), e)
        result = (False, "".join(lines).strip())
    conn.send(result)
    conn.close()


def call_limited(fn: Callable[..., T], args: tuple[Any, ...], timeout_s: float) -> T:
    """``fn(*args)`` in a spawned process; its result (which must pickle). Raises
    :class:`TimeoutError` after ``timeout_s`` seconds (the child killed) and
    :class:`ChildFailed` with the child's exception, or its exit code if it died."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout_s):
            raise TimeoutError(f"no result after {timeout_s:g} s; child killed")
        try:
            ok, value = recv.recv()
        except EOFError:
            proc.join()
            raise ChildFailed(f"child died with exit code {proc.exitcode}") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        recv.close()
    if not ok:
        raise ChildFailed(value)
    return value
