"""hoop for Python: the runtime of the hoop C++ library, driven from PyTorch.

`hoop.torch` is a drop-in replacement for `horovod.torch` (import hoop.torch as hvd); the
extension module `hoop._hoop` underneath passes raw CPU pointers, dtype names and shapes to
the C++ runtime and knows nothing of torch.
"""

from hoop._hoop import HoopError, HoopValueError

__version__ = "0.1.0"

__all__ = ["HoopError", "HoopValueError", "__version__"]
