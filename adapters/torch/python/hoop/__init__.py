"""hoop for Python: the runtime of the hoop C++ library, driven from PyTorch, JAX, TensorFlow
and Keras.

`hoop.torch` is a drop-in replacement for `horovod.torch` (import hoop.torch as hvd), and
`hoop.tensorflow` and `hoop.keras` for `horovod.tensorflow` and `horovod.tensorflow.keras`;
`hoop.jax` has no Horovod counterpart. The extension module `hoop._hoop` underneath passes raw
CPU pointers, dtype names and shapes to the C++ runtime and knows nothing of any framework; the
modules hoop._basics, hoop._process_sets, hoop._compression and hoop._gradients hold what the
framework adapters share.
"""

from hoop._hoop import HoopError, HoopValueError

__version__ = "0.1.0"

__all__ = ["HoopError", "HoopValueError", "__version__"]
