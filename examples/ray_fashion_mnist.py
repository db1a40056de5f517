"""Fashion-MNIST through hoop on a Ray cluster: examples/torch_fashion_mnist.py's training,
run by hoop.ray's RayExecutor as horovod.ray would run it.

    PYTHONPATH=build/python .engines/venv/bin/python examples/ray_fashion_mnist.py --epochs 1

Without --address it starts a local Ray instance with one CPU per worker; with
--address auto (or host:port) it joins a running cluster (`ray start --head` on one node,
`ray start --address=HEAD:6379` on the others; their environment must find the hoop package
and this directory: PYTHONPATH=build/python:examples). Rank 0's per-epoch lines are printed
here, on the driver: the same loss and accuracy as the script under hooprun.
"""

import os
import sys
import time

import ray

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import torch_fashion_mnist as example  # noqa: E402
from hoop.ray import RayExecutor  # noqa: E402


def main():
    p = example.arg_parser(__doc__.splitlines()[0])
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--address", default=None, help="a running Ray cluster (default: a local one)")
    args = p.parse_args()
    # Local workers inherit this process's environment: they import the example from here.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_workers, include_dashboard=False, log_to_driver=False)
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
