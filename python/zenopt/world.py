"""The job a training process runs in: rank, size, agreement, broadcast, and its end.

`init()` starts libzenrt's MPI backend (under mpirun, one process per rank; a process started
without mpirun is a job of one). At exit the world is finalised so that mpirun sees every rank
end cleanly. An uncaught exception that not every rank raises would leave the other ranks
waiting in their next collective until the timeout, so after printing it the job is aborted
(as `python -m mpi4py` does); errors every rank raises together (ZenoptError with every_rank)
end the job normally, with every rank's message.
"""
import atexit
import ctypes
import sys
import time

from . import runtime
from .runtime import ZenoptError

_rank = None
_size = None

# Seconds a failing rank waits before aborting the job: the others print their own errors.
_ABORT_GRACE_S = 1.0


def init():
    """Starts the backend (idempotent); returns (rank, size)."""
    global _rank, _size
    if _rank is None:
        _rank, _size = runtime.world_init()
        atexit.register(_finalize)
        if _size > 1:
            _previous_hook = sys.excepthook

            def abort_unless_every_rank_failed(kind, error, trace):
                _previous_hook(kind, error, trace)
                if not getattr(error, "every_rank", False):
                    sys.stderr.write(f"zenopt: rank {_rank}: uncaught {kind.__name__}: "
                                     "aborting the job\n")
                    sys.stderr.flush()
                    time.sleep(_ABORT_GRACE_S)
                    runtime.world_abort(1)

            sys.excepthook = abort_unless_every_rank_failed
    return _rank, _size


def rank():
    """This process's rank (0 .. size() - 1); initialises the world if needed."""
    return init()[0]


def size():
    """The number of ranks; initialises the world if needed."""
    return init()[1]


def _finalize():
    runtime.close_all_runtimes()
    runtime.world_finalize()


def agree(error, what):
    """Raises on every rank when any rank has an error (a message; None = this rank is fine).

    The failing rank raises its own message, the others name it. Every rank must call this.
    """
    if _size is None or _size == 1:
        if error:
            raise ZenoptError(error, every_rank=True)
        return
    statuses = runtime.world_exchange(1 if error else 0, _size)
    if error:
        raise ZenoptError(error, every_rank=True)
    failed = [r for r, status in enumerate(statuses) if status]
    if failed:
        ranks = ", ".join(str(r) for r in failed)
        raise ZenoptError(f"rank {_rank}: rank {ranks} failed {what} (see its message)",
                          every_rank=True)


def agree_on_value(value, what):
    """Raises on every rank unless every rank holds the same 64-bit value."""
    if _size is None or _size == 1:
        return
    values = runtime.world_exchange(value, _size)
    if any(v != values[0] for v in values):
        differing = ", ".join(str(r) for r, v in enumerate(values) if v != values[0])
        raise ZenoptError(f"rank {_rank}: the ranks have different {what} (rank {differing} "
                          "differs from rank 0)", every_rank=True)


def broadcast_bytes(payload, root=0):
    """Rank `root`'s bytes on every rank (others pass anything, e.g. None)."""
    if _size is None or _size == 1:
        return payload
    length = ctypes.c_uint64(len(payload) if _rank == root else 0)
    runtime.world_broadcast(ctypes.addressof(length), ctypes.sizeof(length), root)
    buffer = ctypes.create_string_buffer(payload if _rank == root else b"", length.value)
    runtime.world_broadcast(ctypes.addressof(buffer), length.value, root)
    return buffer.raw
