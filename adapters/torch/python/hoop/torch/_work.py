"""The work machinery of hoop's torch.distributed backend (distributed.py): the Works its
calls return, the thread that completes their futures, and the list forms' reused buffers."""

import queue
import threading

import torch
from torch._C._distributed_c10d import Work, _create_work_from_future


class _Scratch:
    """Flat buffers of the list forms (all_gather into a list, all_to_all of lists), reused
    across calls of the same size: a fresh buffer of 32 MiB or more is new memory from
    the kernel every time (malloc maps it), and faulting its pages in took longer than the
    collective itself (all_gather of 16 MiB per rank: 31 ms, against 6.7 ms at 8 MiB)."""

    _KEEP = 4  # buffers kept, the most recently returned

    def __init__(self):
        self._lock = threading.Lock()
        self._free = []

    def take(self, numel, dtype):
        with self._lock:
            for i, t in enumerate(self._free):
                if t.numel() == numel and t.dtype == dtype:
                    return self._free.pop(i)
        return torch.empty(numel, dtype=dtype)

    def give(self, tensor):
        with self._lock:
            self._free.append(tensor)
            del self._free[:-self._KEEP]


class _Completer:
    """Completes the futures behind a process group's Works: one thread per group, waiting for
    its requests in the order they were started, which is the order its communicator runs
    them in. (C++ callers such as DDP's reducer wait on a Work's future, so each Work is one
    made from a future, and something must complete it.)"""

    def __init__(self, comm, name):
        self._comm = comm
        self._queue = queue.SimpleQueue()
        self._count_lock = threading.Lock()
        self._outstanding = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, request, future, result, keep, after, done=None):
        """Completes `future` once `request` has finished (after the calls queued before it);
        sets `done`, a threading.Event, then."""
        with self._count_lock:
            self._outstanding += 1
        self._queue.put((request, future, result, keep, after, done))

    def idle(self):
        """Whether no call waits to be completed here: a later call may then be completed by
        its caller without overtaking one (futures complete in the order of the calls)."""
        return self._outstanding == 0

    def stop(self):
        self._queue.put(None)
        self._thread.join()

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, future, result, keep, after, done = item
            try:
                if request is not None:
                    self._comm.wait(request)
                if after is not None:
                    after()
            except Exception as e:  # the call's error, raised to whoever waits on the Work
                future.set_exception(e)
            else:
                future.set_result(result)
            del keep  # the buffers the call read or wrote, alive until it was done
            with self._count_lock:
                self._outstanding -= 1
            if done is not None:
                done.set()


class _PyWork(Work):
    """The Work a Python caller gets for a call still running (async_op=True): wait() raises the
    call's error, which torch 1.13's future-made Work would swallow (its wait() returns True
    whatever the future holds). C++ callers (DDP's reducer) cannot see a Python Work and get
    the future-made one, whose future carries the error to them."""

    def __init__(self, future):
        super().__init__()
        self._future = future

    def wait(self, timeout=None):
        self._future.wait()
        return True

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
        except Exception:
            return False
        return True

    def result(self):
        return self._future.wait()

    def synchronize(self):
        pass

    def get_future(self):
        return self._future


def _make_work(future, python=True):
    return _PyWork(future) if python else _create_work_from_future(future)
