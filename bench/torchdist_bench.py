"""torch.distributed collectives through backend "hoop" against gloo in the same job: for each
collective and size (f32; sum for the reductions), the two groups take turns, REPS rounds of
ITERS calls each, and rank 0 prints the median time per call and the ratio. Run under torchrun
or hooprun:

    python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node=2 \\
        bench/torchdist_bench.py [--collective all_reduce|broadcast|all_gather|all_to_all|all]
        [--min 8] [--max 64M] [--factor 4] [--reps 5]

The size is each rank's input in bytes; GB/s is that size over the time (algorithm bandwidth).
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import hoop.torch.distributed  # noqa: F401  registers backend "hoop"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def make_call(name, elements, size):
    """A function of the group that makes one `name` call on buffers of its own."""
    tensor = torch.ones(elements)
    if name == "all_reduce":
        return lambda group: dist.all_reduce(tensor, group=group)
    if name == "broadcast":
        return lambda group: dist.broadcast(tensor, 0, group=group)
    if name == "all_gather":
        outs = [torch.empty(elements) for _ in range(size)]
        return lambda group: dist.all_gather(outs, tensor, group=group)
    if name == "all_to_all":
        src = torch.ones(elements * size)  # `elements` to each rank
        out = torch.empty(elements * size)
        return lambda group: dist.all_to_all_single(out, src, group=group)
    raise ValueError(f"unknown collective {name}")


COLLECTIVES = ["all_reduce", "broadcast", "all_gather", "all_to_all"]


def timed(group, call, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        call(group)
    return (time.perf_counter() - start) / iters


def run(name, args, gloo):
    size, world = parse_size(args.min), dist.get_world_size()
    if dist.get_rank() == 0:
        print(f"{name} f32, {world} ranks, median of {args.reps} interleaved rounds")
        print(f"{'bytes':>10} {'hoop us':>10} {'gloo us':>10} {'hoop/gloo':>10} "
              f"{'hoop GB/s':>10} {'gloo GB/s':>10}", flush=True)
    while size <= parse_size(args.max):
        elements = max(size // 4, 1)
        call = make_call(name, elements, world)
        iters = max(3, min(1000, (64 << 20) // max(size, 1) // 4))
        for group in (dist.group.WORLD, gloo):  # warm-up
            timed(group, call, max(1, iters // 10))
        times = {"hoop": [], "gloo": []}
        for _ in range(args.reps):
            times["hoop"].append(timed(dist.group.WORLD, call, iters))
            times["gloo"].append(timed(gloo, call, iters))
        if dist.get_rank() == 0:
            h = statistics.median(times["hoop"])
            g = statistics.median(times["gloo"])
            nbytes = elements * 4
            print(f"{nbytes:>10} {h * 1e6:>10.1f} {g * 1e6:>10.1f} {h / g:>10.3f} "
                  f"{nbytes / h / 1e9:>10.3f} {nbytes / g / 1e9:>10.3f}", flush=True)
        size *= args.factor if size < (1 << 20) else 2


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--collective", choices=COLLECTIVES + ["all"], default="all_reduce")
    p.add_argument("--min", default="8")
    p.add_argument("--max", default="64M")
    p.add_argument("--factor", type=int, default=4, help="size step below 1 MiB (then 2)")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    dist.init_process_group("hoop")
    gloo = dist.new_group(backend="gloo")
    for name in COLLECTIVES if args.collective == "all" else [args.collective]:
        run(name, args, gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
