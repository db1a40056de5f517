"""Elastic Fashion-MNIST with hoop.torch, written as a horovod.torch elastic script would be.

    hooprun -np 3 --min-np 2 --host-discovery-script ./discover_hosts.sh \\
        /usr/bin/python3 examples/torch_elastic_fashion_mnist.py --epochs 3

(PYTHONPATH=build/python; discover_hosts.sh prints "host:slots" lines.) The model, the
optimizer, the sampler's place in the epoch and the epoch and batch counters form a TorchState
that is committed every --commit-every batches and at each epoch's end. When a worker is lost,
the others restore the last commit and go on without it; when its host comes back, the job
grows again and the new worker receives the state from rank 0. The learning rate follows the
number of workers. Rank 0 prints each epoch's loss and test accuracy with the number of
workers that finished it.
"""

import time

import torch
import torch.nn.functional as F

import hoop.torch as hvd
from torch_fashion_mnist import MODELS, arg_parser, evaluate, load_fashion_mnist, metric_average


def parse_args(argv=None):
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--commit-every", type=int, default=20, help="batches between commits")
    return p.parse_args(argv)


def train(args):
    """The elastic training; returns rank 0's epoch lines (also printed there), as hoop.ray's
    ElasticRayExecutor hands them to its driver."""
    hvd.init()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = load_fashion_mnist("train", args.data_dir)
    test_x, test_y = load_fashion_mnist("t10k", args.data_dir)
    dataset = torch.utils.data.TensorDataset(train_x, train_y)

    model = MODELS[args.model]()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=args.seed)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    def on_reset():
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                                 sampler=state.sampler, drop_last=True)
            start, loss_sum, steps = time.perf_counter(), 0.0, 0
            for x, y in loader:
                if args.max_steps and state.batch >= args.max_steps:
                    break
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                loss_sum, steps = loss_sum + loss.item(), steps + 1
                state.sampler.record_batch(state.batch, args.batch_size)
                state.batch += 1
                if state.batch % args.commit_every == 0:
                    state.commit()
            loss = metric_average(loss_sum / max(steps, 1), "train_loss")
            accuracy = evaluate(model, test_x, test_y)
            if hvd.rank() == 0:
                lines.append(f"epoch {state.epoch + 1}/{args.epochs}: train loss {loss:.4f}, "
                             f"test accuracy {100 * accuracy:.2f} %, "
                             f"{steps / (time.perf_counter() - start):.1f} batches/s "
                             f"({hvd.size()} workers)")
                print(lines[-1], flush=True)
            state.epoch += 1
            state.batch = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()

    lines = []
    train(state)
    hvd.shutdown()
    return lines


if __name__ == "__main__":
    train(parse_args())
