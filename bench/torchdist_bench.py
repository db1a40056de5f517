"""torch.distributed all_reduce through backend "hoop" against gloo in the same job: for each
size (f32, sum), the two groups take turns, REPS rounds of ITERS calls each, and rank 0 prints
the median time per call and the ratio. Run under torchrun:

    python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node=2 \\
        bench/torchdist_bench.py [--min 8] [--max 64M] [--reps 5]
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


def timed(group, tensor, iters):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    return (time.perf_counter() - start) / iters


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min", default="8")
    p.add_argument("--max", default="64M")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    dist.init_process_group("hoop")
    gloo = dist.new_group(backend="gloo")
    hoop_group = dist.group.WORLD
    if dist.get_rank() == 0:
        print(f"all_reduce f32 sum, {dist.get_world_size()} ranks, median of {args.reps} "
              f"interleaved rounds")
        print(f"{'bytes':>10} {'hoop us':>10} {'gloo us':>10} {'hoop/gloo':>10} "
              f"{'hoop GB/s':>10} {'gloo GB/s':>10}")
    size = parse_size(args.min)
    while size <= parse_size(args.max):
        tensor = torch.ones(max(size // 4, 1))
        iters = max(3, min(1000, (64 << 20) // max(size, 1) // 4))
        for group in (hoop_group, gloo):  # warm-up
            timed(group, tensor, max(1, iters // 10))
        times = {"hoop": [], "gloo": []}
        for _ in range(args.reps):
            times["hoop"].append(timed(hoop_group, tensor, iters))
            times["gloo"].append(timed(gloo, tensor, iters))
        if dist.get_rank() == 0:
            h = statistics.median(times["hoop"])
            g = statistics.median(times["gloo"])
            nbytes = tensor.numel() * 4
            print(f"{nbytes:>10} {h * 1e6:>10.1f} {g * 1e6:>10.1f} {h / g:>10.3f} "
                  f"{nbytes / h / 1e9:>10.3f} {nbytes / g / 1e9:>10.3f}", flush=True)
        size *= 4 if size < (1 << 20) else 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
