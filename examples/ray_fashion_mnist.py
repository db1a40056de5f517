"""Fashion-MNIST through hoop on a Ray cluster: examples/torch_fashion_mnist.py's training,
run by hoop.ray's RayExecutor as horovod.ray would run it.

    PYTHONPATH=build/python .engines/venv/bin/python examples/ray_fashion_mnist.py --epochs 1

Without --address it starts a local Ray instance with one CPU per worker; with
--address auto (or host:port) it joins a running cluster (`ray start --head` on one node,
`ray start --address=HEAD:6379` on the others; their environment must find the hoop package
and this directory: PYTHONPATH=build/python:examples). Rank 0's per-epoch lines are printed
here, on the driver: the same loss and accuracy as the script under hooprun.

With --elastic it runs examples/torch_elastic_fashion_mnist.py's training instead, through
ElasticRayExecutor: between 1 and --num-workers workers, a lost one replaced, the training going
on from its last commit.
"""

import os
import sys
import time

import ray

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import torch_elastic_fashion_mnist as elastic_example  # noqa: E402
import torch_fashion_mnist as example  # noqa: E402
from hoop.ray import ElasticRayExecutor, RayExecutor  # noqa: E402


def run_elastic(args):
    settings = ElasticRayExecutor.create_settings(min_np=1, max_np=args.num_workers,
                                                  timeout_s=60)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    lines = executor.run(lambda: elastic_example.train(args))[0]
    for line in lines:
        print(line, flush=True)
    executor.shutdown()
    return lines


def parse_args(argv=None):
    p = example.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--address", default=None, help="a running Ray cluster (default: a local one)")
    p.add_argument("--elastic", action="store_true",
                   help="elastic training through ElasticRayExecutor")
    p.add_argument("--commit-every", type=int, default=20, help="with --elastic: batches "
                   "between commits")
    return p.parse_args(argv)


def main():
    args = parse_args()
    # Local workers inherit this process's environment: they import the example from here.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_workers, include_dashboard=False, log_to_driver=False)
    if args.elastic:
        run_elastic(args)
        ray.shutdown()
        return
    started = time.perf_counter()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60),
                           num_workers=args.num_workers, cpus_per_worker=1)
    executor.start()
    print(f"{args.num_workers} workers on {len(set(executor.nodes()))} nodes started in "
          f"{time.perf_counter() - started:.2f} s", flush=True)
    args.print_epochs = False
    epochs = executor.run(example.train, args=[args])[0]
    for m in epochs:
        print(example.epoch_line(m), flush=True)
    executor.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
