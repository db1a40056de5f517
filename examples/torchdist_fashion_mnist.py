"""Fashion-MNIST with torch's DistributedDataParallel over backend "hoop": a plain DDP script,
but for the backend's name and the import that registers it.

    hooprun -np 2 /usr/bin/python3 examples/torchdist_fashion_mnist.py --epochs 1
    /usr/bin/python3 -m torch.distributed.run --nproc_per_node=2 examples/torchdist_fashion_mnist.py

(PYTHONPATH=build/python; Debian's torchrun also needs --redirects 1 --tee 1.) Under hooprun
init_process_group("hoop") takes hooprun's ranks and store; under torchrun, torch's env://
variables. A DistributedSampler shards the training set, DDP averages the gradients, and rank 0
prints each epoch's loss, test accuracy and samples/s. --backend gloo runs the same over gloo.
"""

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import hoop.torch.distributed  # noqa: F401  registers backend "hoop"
from torch_fashion_mnist import MODELS, arg_parser, load_fashion_mnist


def parse_args():
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--backend", default="hoop", help="torch.distributed backend")
    return p.parse_args()


def evaluate(model, x, y, rank, size):
    """(correct, total) over this rank's share of the test set."""
    mine = torch.arange(rank, len(y), size)
    model.eval()
    with torch.no_grad():
        correct = (model(x[mine]).argmax(1) == y[mine]).sum().item()
    model.train()
    return correct, len(mine)


def main():
    args = parse_args()
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)  # the same initial model everywhere (DDP broadcasts rank 0's)

    train = TensorDataset(*load_fashion_mnist("train", args.data_dir))
    test_x, test_y = load_fashion_mnist("t10k", args.data_dir)
    model = DistributedDataParallel(MODELS[args.model]())
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=args.momentum)
    sampler = DistributedSampler(train, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        start, loss_sum, steps = time.perf_counter(), 0.0, 0
        for x, y in loader:
            if args.max_steps and steps == args.max_steps:
                break
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            steps += 1
        elapsed = time.perf_counter() - start
        correct, total = evaluate(model, test_x, test_y, rank, size)
        totals = torch.tensor([loss_sum / max(steps, 1), correct, total], dtype=torch.float64)
        dist.all_reduce(totals)
        if rank == 0:
            print(f"epoch {epoch}: loss {totals[0].item() / size:.4f}  "
                  f"test accuracy {100 * totals[1].item() / totals[2].item():.2f} %  "
                  f"{steps * args.batch_size * size / elapsed:.0f} samples/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
