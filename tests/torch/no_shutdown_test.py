"""A training script that ends without hvd.shutdown(), as most Horovod scripts do: a few
DistributedOptimizer steps, then rank 0 (the coordinator) ends first and the others a little
later, while their runtime idles. hoop shuts the runtime down at exit (as Horovod's atexit
does), so no rank prints an error line and every rank exits 0.
Run under hooprun -np 2 (or more); run_expect.py --reject-errors checks every rank's output.
"""

import time

import torch

import hoop.torch as hvd

hvd.init()
torch.manual_seed(0)
model = torch.nn.Linear(32, 4)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
for _ in range(10):
    optimizer.zero_grad()
    model(torch.randn(8, 32)).sum().backward()
    optimizer.step()
if hvd.rank() != 0:
    time.sleep(0.3)
print(f"OK no_shutdown rank {hvd.rank()}", flush=True)
