"""The bridge between torch tensors and hoop._hoop: dtype names, raw pointers, operation
names, and the table of operations in flight.

The runtime reads and writes tensor memory from its own thread, so every tensor handed to it
stays referenced in the table until synchronize() has waited for its handle.

CUDA tensors (in a build with CUDA) go to the runtime's device path. The runtime works on a
stream of its own, so start() waits for the work queued on torch's current stream of each
tensor's device before the runtime may read it; a handle completes only once the runtime's
stream has finished, so torch's later work sees the results.
"""

import collections
import itertools

import torch

from hoop import _hoop

_DTYPE_NAMES = {
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
}

# Stands in for the data of empty tensors, whose data_ptr() may be 0: the runtime refuses
# null data but never touches the bytes of a zero-element tensor.
_EMPTY_STANDIN = torch.zeros(16, dtype=torch.uint8)


def check_tensor(tensor, what):
    """Raises a clear error for tensors the runtime cannot take; returns the dtype name."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type == "cuda":
        if not _hoop.cuda_built():
            raise ValueError(f"{what}: tensor is on {tensor.device}, but this hoop was built "
                             "without CUDA (no nvcc at build time): move it to the CPU or "
                             "rebuild hoop on a machine with the CUDA toolkit")
    elif tensor.device.type != "cpu":
        raise ValueError(f"{what}: tensor is on {tensor.device}; hoop.torch takes CPU and CUDA "
                         "tensors")
    if tensor.layout != torch.strided:
        raise ValueError(f"{what}: {tensor.layout} tensors are not supported (dense tensors only)")
    name = _DTYPE_NAMES.get(tensor.dtype)
    if name is None:
        raise ValueError(f"{what}: dtype {tensor.dtype} is not supported (uint8, int8, int16, "
                         "int32, int64, float16, bfloat16, float32, float64)")
    return name


def contiguous(tensor):
    """The tensor itself when dense row-major, else a row-major copy."""
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def in_place(tensor):
    """A contiguous buffer for an in-place operation on `tensor`, and the finish callback that
    copies the result back when the buffer had to be a copy and returns `tensor`."""
    buffer = contiguous(tensor)

    def finish(_):
        if buffer is not tensor:
            with torch.no_grad():
                tensor.copy_(buffer)
        return tensor

    return buffer, finish


def ptr(tensor):
    """The address the runtime reads or writes for a contiguous tensor."""
    if tensor.numel() > 0 or tensor.is_cuda:
        return tensor.data_ptr()  # may be 0 for an empty CUDA tensor: the runtime allows that
    return _EMPTY_STANDIN.data_ptr()


def shape(tensor):
    """The tensor's shape as the runtime takes it: a list of ints."""
    return list(tensor.shape)


def device(tensor):
    """The runtime's device number: -1 for host memory, else the CUDA ordinal."""
    return tensor.device.index if tensor.is_cuda else -1


def same_device(tensors, what):
    """The one runtime device of a group of tensors (host if empty); raises if they differ."""
    devices = {str(t.device) for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"{what}: the tensors of one group must be on one device, not on "
                         f"{', '.join(sorted(devices))}")
    return device(tensors[0]) if tensors else -1


def take_output(hoop_handle, like):
    """A new tensor holding an allgather, alltoall or reducescatter result, with the dtype
    and on the device of `like`."""
    out = torch.empty(_hoop.output_shape(hoop_handle), dtype=like.dtype, device=like.device)
    if out.numel() > 0:
        _hoop.copy_output(hoop_handle, out.data_ptr())
    return out


def _cuda_tensors(objects):
    for o in objects:
        if isinstance(o, torch.Tensor):
            if o.is_cuda:
                yield o
        elif isinstance(o, (tuple, list)):
            yield from _cuda_tensors(o)


def wait_for_producers(keep_alive):
    """Blocks until the kernels torch queued on the current stream of each CUDA tensor's
    device have finished: the runtime reads the tensors from its own stream."""
    for dev in {t.device for t in _cuda_tensors(keep_alive)}:
        torch.cuda.current_stream(dev).synchronize()


# Auto-generated names: horovod numbers unnamed operations; here each kind counts per
# process set, so ranks that make the same unnamed calls on a set in the same order name them
# alike, whatever other sets they are not part of did meanwhile.
_name_counters = collections.defaultdict(itertools.count)


def op_name(kind, name, process_set_id):
    """The runtime name of an operation: "<kind>.<name>", or "<kind>.noname.<n>" (with the
    set's id, "<kind>.noname.set<id>.<n>", outside the global set)."""
    if name is not None:
        return f"{kind}.{name}"
    n = next(_name_counters[kind, process_set_id])
    if process_set_id == 0:
        return f"{kind}.noname.{n}"
    return f"{kind}.noname.set{process_set_id}.{n}"


def reset_names():
    """Restarts the numbering of unnamed operations (init does, before the runtime starts)."""
    _name_counters.clear()


class _Pending:
    """One user-visible operation: runtime handles, the tensors they use, and how to turn
    their completion into the result synchronize() returns."""

    __slots__ = ("hoop_handles", "keep_alive", "finish")

    def __init__(self, hoop_handles, keep_alive, finish):
        self.hoop_handles = hoop_handles
        self.keep_alive = keep_alive
        self.finish = finish


_pending = {}
_next_handle = itertools.count(1)


def start(starters, keep_alive, finish):
    """Starts runtime operations (callables returning runtime handles) as one user handle.

    finish(hoop_handles) builds the result once all succeeded. If a later starter raises, the
    ones already started are waited for before the error propagates, as they use the tensors.
    """
    wait_for_producers(keep_alive)
    started = []
    try:
        for starter in starters:
            started.append(starter())
    except BaseException:
        _finish_all(started)
        for h in started:
            _hoop.release(h)
        raise
    handle = next(_next_handle)
    _pending[handle] = _Pending(started, keep_alive, finish)
    return handle


def _finish_all(hoop_handles):
    """Waits for every handle; returns the first failure (or None)."""
    first_error = None
    for h in hoop_handles:
        try:
            _hoop.wait(h)
        except _hoop.HoopError as e:
            first_error = first_error or e
    return first_error


def poll(handle):
    """True once the operation has finished (synchronize() will then not block)."""
    pending = _pending.get(handle)
    if pending is None:
        raise ValueError(f"poll: unknown or already synchronized handle {handle}")
    return all(_hoop.poll(h) for h in pending.hoop_handles)


def synchronize(handle):
    """Waits for an operation and returns its result; raises HoopError with the cause.

    Unknown handles return None, as in horovod.
    """
    pending = _pending.pop(handle, None)
    if pending is None:
        return None
    try:
        error = _finish_all(pending.hoop_handles)
    except BaseException:
        # Interrupted (e.g. KeyboardInterrupt) while the runtime may still use the tensors:
        # keep them referenced so a later synchronize() can finish the job.
        _pending[handle] = pending
        raise
    try:
        if error is not None:
            raise error
        return pending.finish(pending.hoop_handles)
    finally:
        for h in pending.hoop_handles:
            _hoop.release(h)


def forget_all():
    """Drops the table at shutdown (the runtime has finished or failed all work by then)."""
    _pending.clear()
