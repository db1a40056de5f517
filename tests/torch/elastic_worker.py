"""A worker of an elastic hoop.torch job for elastic_test.py, written as a Horovod elastic
script: a TorchState of a model, a DistributedOptimizer, an ElasticSampler and a step counter.

Each step's loss is -sum(weight), so every rank's gradient is -1 and SGD at lr 1 adds exactly 1
to each weight per step, whatever the number of ranks: after STEPS steps the weight is STEPS
unless a reset lost or repeated a step. Its fake host is $FAKEHOST.

    elastic_worker.py STEPS
"""

import os
import sys
import time

import torch

import hoop.torch as hvd

steps = int(sys.argv[1])
hvd.init()
model = torch.nn.Linear(4, 1, bias=False)
torch.nn.init.zeros_(model.weight)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                     named_parameters=model.named_parameters())
sampler = hvd.elastic.ElasticSampler(list(range(100000)), shuffle=False)
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, step=0)
resets = []
state.register_reset_callbacks([lambda: resets.append(hvd.size())])
announced = False


@hvd.elastic.run
def train(state):
    global announced
    while state.step < steps:
        optimizer.zero_grad()
        (-model.weight.sum()).backward()
        optimizer.step()
        state.sampler.record_batch(state.step, 1)
        state.step += 1
        if not announced:
            print(f"READY host={os.environ.get('FAKEHOST')} pid={os.getpid()}", flush=True)
            announced = True
        if state.step % 5 == 0:
            state.commit()
        time.sleep(0.01)


train(state)
weight = model.weight.detach()
exact = bool(torch.all(weight == steps))
print(f"DONE rank {hvd.rank()} size {hvd.size()} weight {weight[0, 0].item():.0f} "
      f"exact={exact} sampler size {sampler.num_replicas} resets {resets}", flush=True)
hvd.shutdown()
sys.exit(0 if exact else 5)
