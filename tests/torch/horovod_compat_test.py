"""A training script written for horovod.torch, in the shape of horovod's own
examples/pytorch/pytorch_mnist.py, whose only change is the import line. Synthetic data
stands in for MNIST. Run under hooprun -np 2; it checks that training made progress and
that every rank ends with the same model, and prints "OK horovod script" on rank 0.
"""

import argparse

import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import hoop.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch MNIST-style Example")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--test-batch-size", type=int, default=100)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--fp16-allreduce", action="store_true", default=False)
parser.add_argument("--use-adasum", action="store_true", default=False)
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
parser.add_argument("--data-dir")


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5)
        self.conv2 = nn.Conv2d(4, 8, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 32)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def synthetic_dataset(n, seed):
    """Learnable images: the label decides which quadrant is bright."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    images = torch.rand(n, 1, 20, 20, generator=g) * 0.2
    for i, label in enumerate(labels.tolist()):
        r, c = divmod(label, 2)
        images[i, 0, r * 10:(r + 1) * 10, c * 10:(c + 1) * 10] += 1.0
    return torch.utils.data.TensorDataset(images, labels)


def train(epoch):
    model.train()
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
            print("Train Epoch: {} [{}/{}]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_sampler), loss.item()))


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def test():
    model.eval()
    test_loss = 0.
    test_accuracy = 0.
    for data, target in test_loader:
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        output = model(data)
        test_loss += F.nll_loss(output, target, reduction="sum").item()
        pred = output.data.max(1, keepdim=True)[1]
        test_accuracy += pred.eq(target.data.view_as(pred)).cpu().float().sum()
    test_loss /= len(test_sampler)
    test_accuracy /= len(test_sampler)
    test_loss = metric_average(test_loss, "avg_loss")
    test_accuracy = metric_average(test_accuracy, "avg_accuracy")
    if hvd.rank() == 0:
        print("\nTest set: Average loss: {:.4f}, Accuracy: {:.2f}%\n".format(
            test_loss, 100. * test_accuracy))
    return test_loss, test_accuracy


if __name__ == "__main__":
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    hvd.init()
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.set_device(hvd.local_rank())
        torch.cuda.manual_seed(args.seed)
    torch.set_num_threads(1)

    kwargs = {"num_workers": 1, "pin_memory": True} if args.cuda else {}
    if (kwargs.get("num_workers", 0) > 0 and hasattr(mp, "_supports_context") and
            mp._supports_context and "forkserver" in mp.get_all_start_methods()):
        kwargs["multiprocessing_context"] = "forkserver"

    train_dataset = synthetic_dataset(512, 1)
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, sampler=train_sampler, **kwargs)
    test_dataset = synthetic_dataset(200, 2)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size,
                                              sampler=test_sampler, **kwargs)

    model = Net()
    lr_scaler = hvd.size() if not args.use_adasum else 1
    if args.cuda:
        model.cuda()
        if args.use_adasum and hvd.nccl_built():
            lr_scaler = hvd.local_size()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)

    first_loss, _ = test()
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        last_loss, accuracy = test()

    # What this test adds to the example: progress, and one model on every rank.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).unsqueeze(0)
    gathered = hvd.allgather(flat, name="final_params")
    same = all(torch.equal(gathered[k], flat[0]) for k in range(hvd.size()))
    assert same, f"rank {hvd.rank()}: ranks ended with different models"
    assert last_loss < first_loss, f"loss did not fall: {first_loss} -> {last_loss}"
    assert hvd.broadcast_object({"done": True}) == {"done": True}
    if hvd.rank() == 0:
        print(f"OK horovod script (loss {first_loss:.3f} -> {last_loss:.3f}, "
              f"accuracy {accuracy:.2f})", flush=True)
    hvd.shutdown()
