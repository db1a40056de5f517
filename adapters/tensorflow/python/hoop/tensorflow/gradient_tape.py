"""DistributedGradientTape and DistributedOptimizer of hoop.tensorflow: gradients averaged over
the ranks (grouped, fused allreduces) before they are used, as in horovod.tensorflow."""

import tensorflow as tf

from hoop import _gradients
from hoop._ops import Average
from hoop._process_sets import global_process_set
from hoop.tensorflow.compression import Compression
from hoop.tensorflow.mpi_ops import grouped_allreduce


def reduce_gradients(grads, variables=None, compression=Compression.none, sparse_as_dense=False,
                     op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                     process_set=global_process_set, name="gradients"):
    """Each gradient reduced over the ranks, in grouped allreduces; None stays None."""
    def grouped(tensors, reduce_op, prescale, postscale, group_name):
        if sparse_as_dense:
            tensors = [tf.convert_to_tensor(t) if isinstance(t, tf.IndexedSlices) else t
                       for t in tensors]
        return grouped_allreduce(tensors, compression=compression, op=reduce_op,
                                 prescale_factor=prescale, postscale_factor=postscale,
                                 process_set=process_set, name=group_name)
    return _gradients.reduce_gradients(grads, variables, grouped, op, gradient_predivide_factor,
                                       num_groups, groups, name)


class DistributedGradientTape:
    """A tf.GradientTape whose gradient() gives the gradients reduced over the ranks. Wraps a
    tape that has recorded the forward pass; everything else is the tape's own."""

    def __init__(self, gradtape, device_dense="", device_sparse="",
                 compression=Compression.none, sparse_as_dense=False, op=Average,
                 gradient_predivide_factor=1.0, num_groups=0, groups=None,
                 process_set=global_process_set):
        """Wraps `gradtape`; the other arguments say how gradients are reduced, as for
        reduce_gradients (device_dense and device_sparse are accepted for Horovod
        compatibility and unused)."""
        del device_dense, device_sparse
        self._tape = gradtape
        self._reduce = dict(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                            gradient_predivide_factor=gradient_predivide_factor,
                            num_groups=num_groups, groups=groups, process_set=process_set)

    def __getattr__(self, attr):
        """The wrapped tape's attribute."""
        return getattr(self._tape, attr)

    def __enter__(self):
        """Starts recording on the wrapped tape."""
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        """Stops recording on the wrapped tape."""
        return self._tape.__exit__(*exc)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        """tf.GradientTape.gradient, each gradient then reduced over the ranks."""
        grads = self._tape.gradient(target, sources, output_gradients, unconnected_gradients)
        flat = tf.nest.flatten(grads)
        variables = tf.nest.flatten(sources)
        return tf.nest.pack_sequence_as(
            grads, reduce_gradients(flat, variables, name="tape.gradients", **self._reduce))


class _DistributedOptimizerV1(tf.compat.v1.train.Optimizer):
    """A TF1 optimizer whose compute_gradients() reduces the gradients over the ranks."""

    def __init__(self, optimizer, name, use_locking, reduce):
        self._optimizer = optimizer
        self._reduce = reduce
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}",
                         use_locking=use_locking)

    def compute_gradients(self, *args, **kwargs):
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = zip(*pairs) if pairs else ((), ())
        reduced = reduce_gradients(list(grads), list(variables), name="optimizer.gradients",
                                   **self._reduce)
        return list(zip(reduced, variables))

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set):
    """Wraps an optimizer so that it applies gradients reduced over the ranks: a TF1
    tf.compat.v1.train.Optimizer here, a Keras optimizer through hoop.keras."""
    del device_dense, device_sparse
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if backward_passes_per_step != 1:
            raise ValueError("hoop.tensorflow: backward_passes_per_step needs a Keras "
                             "optimizer (hoop.keras.DistributedOptimizer)")
        return _DistributedOptimizerV1(optimizer, name, use_locking, dict(
            compression=compression, sparse_as_dense=sparse_as_dense, op=op,
            gradient_predivide_factor=gradient_predivide_factor, num_groups=num_groups,
            groups=groups, process_set=process_set))
    import hoop.keras  # noqa: PLC0415 -- Keras optimizers are hoop.keras's
    return hoop.keras.DistributedOptimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        backward_passes_per_step=backward_passes_per_step, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups, process_set=process_set)
