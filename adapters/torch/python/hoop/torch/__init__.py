"""hoop.torch: a drop-in replacement for horovod.torch on CPU tensors.

    import hoop.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Launch with hooprun -np N python train.py. Importing hoop.torch also registers the
torch.distributed backend "hoop" (hoop.torch.distributed): dist.init_process_group("hoop").
Signatures, defaults and semantics follow horovod.torch 0.28; failures raise hoop.HoopError
(also exported as HorovodInternalError) whose .code and .message carry the runtime's cause.
Misuse that Horovod reports as ValueError (a name submitted twice while pending, rows that do
not split, a scalar to reducescatter) raises hoop.HoopValueError, which is both a HoopError and
a ValueError.
"""

from hoop._hoop import HoopError
from hoop.torch import elastic
from hoop.torch.elastic import HostsUpdatedInterrupt
from hoop.torch.basics import (Adasum, Average, Max, Min, Product, Sum, ccl_built, cross_rank,
                               cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
                               is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
                               mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built,
                               shutdown, size, start_timeline, stop_timeline)
from hoop.torch.compression import Compression
from hoop.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters)
from hoop.torch.mpi_ops import (allgather_async, allreduce_, allreduce_async, allreduce_async_,
                                alltoall_async, barrier, broadcast_, broadcast_async,
                                broadcast_async_, grouped_allgather_async, grouped_allreduce_,
                                grouped_allreduce_async, grouped_allreduce_async_,
                                grouped_reducescatter_async, join, poll, reducescatter_async,
                                sparse_allreduce_async, synchronize)
from hoop.torch.optimizer import DistributedOptimizer
from hoop.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
from hoop.torch.sync_batch_norm import SyncBatchNorm
from hoop.torch.sync_ops import (allgather, allreduce, alltoall, broadcast, grouped_allgather,
                                 grouped_allreduce, grouped_reducescatter, reducescatter)

## Horovod's exception name, for scripts that catch it.
HorovodInternalError = HoopError

import torch.distributed as _dist

if _dist.is_available():
    from hoop.torch import distributed as _distributed  # noqa: F401  registers backend "hoop"
