"""Variables and Python objects across the ranks, as horovod.tensorflow.functions."""

import io
import pickle

import numpy as np
import tensorflow as tf

from hoop import _hoop
from hoop._process_sets import global_process_set, set_id
from hoop.tensorflow.mpi_ops import _name, allgather, broadcast


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Assigns the root rank's values to `variables` on every rank (in a graph, returns the op
    that does)."""
    variables = list(variables)
    assigns = [v.assign(broadcast(v, root_rank, name=f"broadcast_variables.{i}",
                                  process_set=process_set))
               for i, v in enumerate(variables)]
    return None if tf.executing_eagerly() else tf.group(*assigns)


def broadcast_global_variables(root_rank):
    """broadcast_variables of the TF1 graph's global variables."""
    if tf.executing_eagerly():
        raise RuntimeError("hoop.tensorflow.broadcast_global_variables() runs in graph mode "
                           "only (TF1 global variables); eagerly, call "
                           "broadcast_variables(model.variables, root_rank)")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """The root rank's picklable `obj`, on every rank (eagerly)."""
    name = name or _name("broadcast_object", ps=set_id(process_set))
    is_root = _hoop.rank() == root_rank
    payload = (np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if is_root
               else np.zeros(0, np.uint8))
    size = broadcast(tf.constant([payload.size], tf.int64), root_rank, name=f"{name}.size",
                     process_set=process_set)
    buf = payload if is_root else np.zeros(int(size.numpy()[0]), np.uint8)
    data = broadcast(tf.constant(buf), root_rank, name=f"{name}.data", process_set=process_set)
    return pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's picklable `obj`, in a list in rank order (eagerly)."""
    name = name or _name("allgather_object", ps=set_id(process_set))
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = allgather(tf.constant([payload.size], tf.int64), name=f"{name}.sizes",
                      process_set=process_set).numpy()
    data = allgather(tf.constant(payload), name=f"{name}.data", process_set=process_set).numpy()
    out, at = [], 0
    for n in sizes:
        out.append(pickle.load(io.BytesIO(data[at:at + n].tobytes())))
        at += n
    return out
