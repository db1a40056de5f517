"""hoop as a torch.distributed backend: ``dist.init_process_group("hoop")``.

Importing this module registers the backend ``"hoop"`` with ``torch.distributed``. Each process
group gets a hoop Communicator of its own: the group's rank 0 serves a hoop rendezvous store in
its process and publishes its address, port and a fresh secret through the c10d store that
torch hands the backend (``env://`` under torchrun, a FileStore, a TCPStore; under hooprun,
mpirun or srun without torch's variables, the job's hoop store: see _rendezvous), and every
rank of the group connects to it. The collectives then run on hoop's transports (shared
memory on one host, TCP across hosts): small ones blocking on the caller's thread, the others
as non-blocking calls; each Work is made from a future that a thread of the group completes
when the call is done, so ``wait``, ``is_completed`` and ``get_future`` behave as gloo's, for
Python callers and C++ ones (DDP's reducer) alike.

Needs torch 1.13 or newer, whose ``ProcessGroup`` Python code may subclass.
"""

import os
import secrets
import socket
import sys
import threading
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

from hoop import _hoop
from hoop.torch import _rendezvous
from hoop.torch._work import _Completer, _Scratch, _make_work

__all__ = ["ProcessGroupHoop", "BACKEND"]

## The backend's name, as in dist.init_process_group("hoop").
BACKEND = "hoop"

_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
}
# Reductions of bool tensors are logical, which bytes compute with max (or) and min (and).
_BOOL_OPS = {"max": "max", "min": "min", "sum": "max", "prod": "min"}

_OPS = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.PRODUCT: "prod",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
}
if hasattr(dist.ReduceOp, "AVG"):
    _OPS[dist.ReduceOp.AVG] = "avg"

_BOOTSTRAP_KEY = "hoop/bootstrap"
# How long a call's caller waits for it before handing its completion to the group's thread.
_INLINE_SECONDS = 50e-6
# Calls up to this size run on the caller's thread when nothing is in flight (an async_op call
# then returns done, as gloo's small ones nearly are).
_NOW_BYTES = 64 << 10


def _dtype(tensor, what):
    if tensor.dtype == torch.bool:
        return "u8"
    try:
        return _DTYPES[tensor.dtype]
    except KeyError:
        raise TypeError(f"hoop backend: {what}: dtype {tensor.dtype} is not supported "
                        f"(supported: {', '.join(str(d) for d in _DTYPES)} and torch.bool)") from None


def _op(reduce_op, tensor, what):
    for known, name in _OPS.items():
        if reduce_op == known:
            return _BOOL_OPS[name] if tensor.dtype == torch.bool and name in _BOOL_OPS else name
    raise ValueError(f"hoop backend: {what}: reduce op {reduce_op} is not supported "
                     f"(supported: SUM, PRODUCT, MIN, MAX, AVG)")


def _nbytes(tensor):
    return tensor.numel() * tensor.element_size()


def _check_host(tensor, what):
    if tensor.device.type != "cpu":
        raise ValueError(f"hoop backend: {what}: a {tensor.device.type} tensor; this build of "
                         f"the backend takes CPU tensors")


class _Staged:
    """A tensor the collective can write: the tensor itself when contiguous, else a contiguous
    copy that finish() copies back."""

    def __init__(self, tensor, what, read=True):
        _check_host(tensor, what)
        self.tensor = tensor
        self.buffer = tensor if tensor.is_contiguous() else (
            tensor.contiguous() if read else torch.empty_like(tensor, memory_format=torch.contiguous_format))

    @property
    def ptr(self):
        return self.buffer.data_ptr()

    def finish(self):
        if self.buffer is not self.tensor:
            self.tensor.copy_(self.buffer)


_C10D_FILE = os.path.join("distributed", "distributed_c10d.py")
_AUTOGRAD_FILE = os.path.join("autograd", "__init__.py")

# Who makes a call, as _caller() tells: what Work it gets and who may complete it.
_SYNC = "sync"          # a torch.distributed function with async_op=False: waits at once
_ASYNC = "async"        # Python code that may wait later: gets a _PyWork
_BACKWARD = "backward"  # C++ inside autograd's backward (DDP's reducer): waits without the GIL
_CPP = "cpp"            # C++ called from Python code (DDP's constructor): may wait holding it


def _caller():
    """The kind of caller of the call being made (_SYNC, _ASYNC, _BACKWARD or _CPP)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return _CPP
    name = frame.f_code.co_filename
    if name.endswith(_C10D_FILE):
        # isend/irecv (and send/recv, which wait on the Work themselves) take no async_op.
        return _SYNC if frame.f_locals.get("async_op", True) is False else _ASYNC
    # A C++ caller leaves no frame of its own: the frame above is the Python code that called
    # into C++. autograd's backward() released the GIL there, so the group's thread can
    # complete the reducer's futures while backward goes on (DDP's overlap); other C++ calls
    # (DDP's parameter checks and broadcasts) may wait on the future holding the GIL.
    return _BACKWARD if name.endswith(_AUTOGRAD_FILE) else _CPP


def _rendezvous_address():
    """Where the group's rank 0 serves the hoop store: its own address on the way to
    HOOP_RENDEZVOUS_ADDR (hooprun's host) or MASTER_ADDR (the job's rank 0 under torchrun),
    which the group's other ranks reach it at as they reach those; else loopback (every rank
    on this host)."""
    for name in ("HOOP_RENDEZVOUS_ADDR", "MASTER_ADDR"):
        value = os.environ.get(name)
        if value:
            return _local_address_toward(socket.gethostbyname(value))
    return "127.0.0.1"


def _local_address_toward(target):
    """This host's address that packets to `target` leave from (`target` itself when it is one
    of this host's); connecting a UDP socket sends nothing."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((target, 9))
            return s.getsockname()[0]
        except OSError:
            return target


class ProcessGroupHoop(ProcessGroup):
    """A torch.distributed process group whose collectives run on a hoop Communicator."""

    def __init__(self, store, rank, size, timeout):
        """The group of `size` ranks, this one `rank`, meeting through the c10d `store`;
        `timeout` (a timedelta, or seconds) is its communicator's deadline."""
        super().__init__(rank, size)
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self._store_host = None
        if size > 1 and rank == 0:
            address = _rendezvous_address()
            secret = secrets.token_hex(16)
            job_id = "torch-" + secrets.token_hex(6)
            self._store_host = _hoop.StoreHost(address, secret, job_id, seconds)
            store.set(_BOOTSTRAP_KEY, f"{address} {self._store_host.port} {secret} {job_id}")
        if size > 1:
            address, port, secret, job_id = store.get(_BOOTSTRAP_KEY).decode().split(" ")
        else:
            address, port, secret, job_id = "127.0.0.1", "0", "single", "torch-single"
        self._comm = _hoop.Comm(rank, size, address, int(port), secret, job_id, seconds)
        self._completer = _Completer(self._comm, f"hoop-pg-{job_id}")
        self._scratch = _Scratch()

    def getBackendName(self):
        """The backend's name, "hoop"."""
        return BACKEND

    def name(self):
        """The backend's name, "hoop"."""
        return BACKEND

    # --- helpers ---------------------------------------------------------------------------

    def _start(self, start, nbytes, result, keep=(), after=None):
        """Makes a call: start(now) starts it on the communicator and returns its request, or,
        with now=True, runs it to the end on this thread. A small call with nothing in flight
        (futures complete in the order of the calls) runs now: the hand-off to the
        communicator's thread and back costs more than it takes. `after` runs once it is done
        (copies out of staging buffers); `keep` are the buffers it uses, alive until then."""
        if nbytes <= _NOW_BYTES and self._completer.idle():
            start(True)  # a failure raises here: every caller either waits at once or may
            if after is not None:
                after()
            future = torch.futures.Future()
            future.set_result(result)
            return _make_work(future, _caller() in (_SYNC, _ASYNC))
        return self._work(start(False), result, keep, after)

    def _work(self, request, result, keep, after):
        caller = _caller()
        python = caller in (_SYNC, _ASYNC)
        # A caller that waits at once (a blocking torch.distributed call), or a call that
        # finishes within a few tens of microseconds, is completed here: a failure then raises
        # to the caller directly, and no hand-off to the group's thread is paid. So is every
        # call of a C++ caller that may hold the GIL while it waits on the future, which the
        # group's thread could then never complete.
        if caller == _CPP or (self._completer.idle() and (
                caller == _SYNC or self._comm.done_within(request, _INLINE_SECONDS))):
            self._comm.wait(request)
            if after is not None:
                after()
            future = torch.futures.Future()
            future.set_result(result)
            return _make_work(future, python)
        future = torch.futures.Future()
        done = threading.Event() if caller == _SYNC else None
        self._completer.add(request, future, result, keep, after, done)
        if done is not None:
            done.wait()  # without the GIL, which the group's thread needs
            future.value()  # raises the call's error
        return _make_work(future, python)

    def _single(self, tensors, what):
        if len(tensors) != 1:
            raise ValueError(f"hoop backend: {what} takes one tensor per rank, got {len(tensors)}")
        return tensors[0]

    # --- collectives -----------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        """dist.all_reduce of the one tensor, in place."""
        what = "allreduce"
        t = self._single(tensors, what)
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, t, what)
        s = _Staged(t, what)
        return self._start(
            lambda now: self._comm.allreduce(s.ptr, s.ptr, t.numel(), _dtype(t, what), op, now),
            _nbytes(t), tensors, (s,), s.finish)

    def broadcast(self, tensors, opts=None):
        """dist.broadcast of the one tensor from opts.rootRank."""
        what = "broadcast"
        t = self._single(tensors, what)
        root = opts.rootRank if opts is not None else 0
        s = _Staged(t, what)
        return self._start(
            lambda now: self._comm.broadcast(s.ptr, t.numel(), _dtype(t, what), root, now),
            _nbytes(t), tensors, (s,), s.finish)

    def _allgather_base(self, output, input, opts=None):
        what = "all_gather_into_tensor"
        _check_host(input, what)
        src = input.contiguous()
        out = _Staged(output, what, read=False)
        if out.buffer.numel() != src.numel() * self.size():
            raise ValueError(f"hoop backend: {what}: the output holds {out.buffer.numel()} "
                             f"elements, not {self.size()} x {src.numel()}")
        counts = [src.numel()] * self.size()
        return self._start(
            lambda now: self._comm.allgatherv(src.data_ptr(), out.ptr, counts,
                                              _dtype(input, what), now),
            _nbytes(output), [output], (src, out), out.finish)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """dist.all_gather: every rank's tensor into the list of outputs, in rank order."""
        what = "all_gather"
        t = self._single(input_tensors, what)
        outs = self._single(output_tensors, what)
        if len(outs) != self.size():
            raise ValueError(f"hoop backend: {what}: {len(outs)} output tensors for "
                             f"{self.size()} ranks")
        _check_host(t, what)
        src = t.contiguous()
        flat = self._scratch.take(self.size() * src.numel(), t.dtype)

        def split():
            for i, o in enumerate(outs):
                o.copy_(flat[i * src.numel():(i + 1) * src.numel()].view_as(o))
            self._scratch.give(flat)

        return self._start(
            lambda now: self._comm.allgatherv(src.data_ptr(), flat.data_ptr(),
                                              [src.numel()] * self.size(), _dtype(t, what), now),
            _nbytes(flat), output_tensors, (src, flat), split)

    def _reduce_scatter_base(self, output, input, opts=None):
        what = "reduce_scatter_tensor"
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, input, what)
        _check_host(input, what)
        src = input.contiguous()
        out = _Staged(output, what, read=False)
        if src.numel() != out.buffer.numel() * self.size():
            raise ValueError(f"hoop backend: {what}: the input holds {src.numel()} elements, "
                             f"not {self.size()} x {out.buffer.numel()}")
        counts = [out.buffer.numel()] * self.size()
        return self._start(
            lambda now: self._comm.reduce_scatterv(src.data_ptr(), out.ptr, counts,
                                                   _dtype(input, what), op, now),
            _nbytes(src), [output], (src, out), out.finish)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        """dist.reduce_scatter: the inputs (one per rank) reduced, input r into rank r's output."""
        what = "reduce_scatter"
        out = self._single(output_tensors, what)
        ins = self._single(input_tensors, what)
        if len(ins) != self.size():
            raise ValueError(f"hoop backend: {what}: {len(ins)} input tensors for "
                             f"{self.size()} ranks")
        for i in ins:
            _check_host(i, what)
        flat = torch.cat([i.reshape(-1) for i in ins])
        counts = [i.numel() for i in ins]
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, out, what)
        staged = _Staged(out, what, read=False)
        return self._start(
            lambda now: self._comm.reduce_scatterv(flat.data_ptr(), staged.ptr, counts,
                                                   _dtype(out, what), op, now),
            _nbytes(flat), output_tensors, (flat, staged), staged.finish)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """dist.all_to_all_single: input_split_sizes[j] rows of `input` to rank j, and
        output_split_sizes[j] rows from it into `output` (empty sizes: an even split)."""
        what = "all_to_all_single"
        _check_host(input, what)
        n = self.size()
        src = input.contiguous()
        out = _Staged(output, what, read=False)
        row_in = src[0].numel() if src.dim() > 0 and src.shape[0] > 0 else 1
        row_out = out.buffer[0].numel() if out.buffer.dim() > 0 and out.buffer.shape[0] > 0 else 1
        if not input_split_sizes:
            input_split_sizes = [src.shape[0] // n] * n if src.dim() > 0 else [0] * n
        if not output_split_sizes:
            output_split_sizes = [out.buffer.shape[0] // n] * n if out.buffer.dim() > 0 else [0] * n
        sends = [s * row_in for s in input_split_sizes]
        recvs = [s * row_out for s in output_split_sizes]
        return self._start(
            lambda now: self._comm.alltoallv(src.data_ptr(), sends, out.ptr, recvs,
                                             _dtype(input, what), now),
            max(_nbytes(src), _nbytes(out.buffer)), [output], (src, out), out.finish)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """dist.all_to_all: input tensor j to rank j, output tensor j from rank j."""
        what = "all_to_all"
        for t in list(input_tensors) + list(output_tensors):
            _check_host(t, what)
        flat_in = self._scratch.take(sum(t.numel() for t in input_tensors),
                                     input_tensors[0].dtype)
        torch.cat([t.reshape(-1) for t in input_tensors], out=flat_in)
        flat_out = self._scratch.take(sum(t.numel() for t in output_tensors),
                                      output_tensors[0].dtype)

        def split():
            at = 0
            for t in output_tensors:
                t.copy_(flat_out[at:at + t.numel()].view_as(t))
                at += t.numel()
            self._scratch.give(flat_in)
            self._scratch.give(flat_out)

        return self._start(
            lambda now: self._comm.alltoallv(flat_in.data_ptr(),
                                             [t.numel() for t in input_tensors],
                                             flat_out.data_ptr(),
                                             [t.numel() for t in output_tensors],
                                             _dtype(input_tensors[0], what), now),
            max(_nbytes(flat_in), _nbytes(flat_out)), output_tensors, (flat_in, flat_out), split)

    def barrier(self, opts=None):
        """dist.barrier: done once every rank of the group has entered it."""
        return self._start(self._comm.barrier, 0, [])

    def reduce(self, tensors, opts=None):
        """dist.reduce of the one tensor into opts.rootRank's."""
        what = "reduce"
        t = self._single(tensors, what)
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, t, what)
        root = opts.rootRank if opts is not None else 0
        s = _Staged(t, what)
        return self._start(
            lambda now: self._comm.reduce(s.ptr, s.ptr, t.numel(), _dtype(t, what), op, root,
                                          now),
            _nbytes(t), tensors, (s,), s.finish if self.rank() == root else None)

    def gather(self, output_tensors, input_tensors, opts=None):
        """dist.gather: every rank's tensor into the root's list of outputs, in rank order."""
        what = "gather"
        t = self._single(input_tensors, what)
        root = opts.rootRank if opts is not None else 0
        _check_host(t, what)
        src = t.contiguous()
        counts = [src.numel()] * self.size()
        nbytes = _nbytes(src) * self.size()
        if self.rank() != root:
            return self._start(
                lambda now: self._comm.gatherv(src.data_ptr(), 0, counts, _dtype(t, what), root,
                                               now),
                nbytes, output_tensors, (src,))
        outs = self._single(output_tensors, what)
        flat = torch.empty(src.numel() * self.size(), dtype=t.dtype)

        def split():
            for i, o in enumerate(outs):
                o.copy_(flat[i * src.numel():(i + 1) * src.numel()].view_as(o))

        return self._start(
            lambda now: self._comm.gatherv(src.data_ptr(), flat.data_ptr(), counts,
                                           _dtype(t, what), root, now),
            nbytes, output_tensors, (src, flat), split)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """dist.scatter: tensor r of the root's list of inputs into rank r's output."""
        what = "scatter"
        out = self._single(output_tensors, what)
        root = opts.rootRank if opts is not None else 0
        staged = _Staged(out, what, read=False)
        counts = [out.numel()] * self.size()
        flat = None
        if self.rank() == root:
            flat = torch.cat([i.reshape(-1) for i in self._single(input_tensors, what)])
        return self._start(
            lambda now: self._comm.scatterv(flat.data_ptr() if flat is not None else 0,
                                            staged.ptr, counts, _dtype(out, what), root, now),
            _nbytes(out) * self.size(), output_tensors, (flat, staged), staged.finish)

    # --- point-to-point ----------------------------------------------------------------------

    def _p2p(self, tensors, peer, what, post):
        t = self._single(tensors, what)
        staged = _Staged(t, what, read=what == "send")
        request = post(staged.ptr, t.numel() * t.element_size(), peer)
        future = torch.futures.Future()

        # Point-to-point requests finish in any order (a receive from one rank before a send to
        # another started earlier), so each gets a thread of its own to complete its future.
        def complete():
            try:
                self._comm.wait_p2p(request)
                if what == "recv":
                    staged.finish()
            except Exception as e:
                future.set_exception(e)
            else:
                future.set_result(tensors)

        thread = threading.Thread(target=complete, name="hoop-p2p", daemon=True)
        thread.start()
        caller = _caller()
        if caller == _SYNC:
            thread.join()  # without the GIL, which the thread needs
            future.value()  # raises the call's error
        return _make_work(future, caller in (_SYNC, _ASYNC))

    def send(self, tensors, dstRank, tag=0):
        """dist.send of the one tensor to dstRank (tag 0 only)."""
        _untagged(tag, "send")
        return self._p2p(tensors, dstRank, "send", self._comm.send)

    def recv(self, tensors, srcRank, tag=0):
        """dist.recv of the one tensor from srcRank (tag 0 only)."""
        _untagged(tag, "recv")
        return self._p2p(tensors, srcRank, "recv", self._comm.recv)

    def recv_anysource(self, tensors, tag=0):
        """Not supported: raises ValueError (name the source rank)."""
        raise ValueError("hoop backend: recv from any source is not supported; name the source "
                         "rank (messages between two ranks arrive in the order they were sent)")


def _untagged(tag, what):
    if tag != 0:
        raise ValueError(f"hoop backend: {what} with tag {tag}: tags are not supported (messages "
                         f"between two ranks match in the order they were sent); use tag 0")


def _create(store, rank, size, timeout):
    return ProcessGroupHoop(store, rank, size, timeout)


if BACKEND not in dist.Backend.__dict__.values() and not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create)
_rendezvous.install()
