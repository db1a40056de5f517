"""hoop.tensorflow.keras: Horovod's module path for the Keras adapter, which is hoop.keras."""

from hoop.keras import *  # noqa: F401,F403
from hoop.keras import __all__  # noqa: F401
