#!/usr/bin/env python3
"""Times one all-reduce of N float32 values on R local ranks: Gloo's dist.all_reduce against
inac_torch (Session.allreduce_ of float32 and int32, and the DDP hook's whole path: INAC plus
the status all-reduce over Gloo, which is also timed alone). Same options as train_digits.py for
the job; see README.md.

  python3 bench_allreduce.py --ranks 4 --job 7 --bind-base 127.0.0.11 --sizes 2410,76810,1048576
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import train_digits


def bench_rank(rank, world, args, out=print):
    import inac_torch

    torch.set_num_threads(1)
    session = inac_torch.open(args.job, train_digits.worker_id(args, rank), server=args.server,
                              token=args.token, config_file=args.config_file,
                              bind=train_digits.bind_address(args, rank), port=args.port,
                              timeout_ms=args.timeout_ms)
    state = inac_torch.HookState(session)
    results = {}
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            x = torch.randn(n, generator=torch.Generator().manual_seed(rank))
            xi = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
            ops = {
                "gloo": lambda: dist.all_reduce(x.clone()),
                "inac_f32": lambda: session.allreduce_(x.clone()),
                "inac_i32": lambda: session.allreduce_(xi.clone()),
                "hook": lambda: state.allreduce_bucket_(x.clone()),
                # the hook's status all-reduce alone (MAX of one int32 per rank, over Gloo)
                "status": lambda: dist.all_reduce(torch.zeros(world, dtype=torch.int32),
                                                  op=dist.ReduceOp.MAX),
            }
            for name, op in ops.items():
                times = []
                for i in range(args.warmup + args.iterations):
                    dist.barrier()
                    start = time.perf_counter()
                    op()
                    if i >= args.warmup:
                        times.append((time.perf_counter() - start) * 1e3)
                results[(n, name)] = statistics.median(times)
        if rank == 0 and out:
            names = list(ops)
            out(f"{'values':>9s} " + " ".join(f"{k + ' ms':>12s}" for k in names))
            for n in [int(s) for s in args.sizes.split(",")]:
                out(f"{n:9d} " + " ".join(f"{results[(n, k)]:12.3f}" for k in names))
            out(f"hook: {state.summary()}")
    finally:
        session.close()
    return {f"{n}/{k}": v for (n, k), v in results.items()}


def _rank_main(rank, world, args, port, queue):
    import datetime
    import traceback

    try:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=300))
        queue.put((rank, "ok", bench_rank(rank, world, args)))
        dist.destroy_process_group()
    except BaseException:
        queue.put((rank, "error", traceback.format_exc()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--sizes", default="2410,76810,1048576", help="float32 values per all-reduce")
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--job", type=int, required=True)
    p.add_argument("--worker-format", default="h{rank}")
    p.add_argument("--server", default=None)
    p.add_argument("--token", default=None)
    p.add_argument("--config-file", default=None)
    p.add_argument("--bind", default=None)
    p.add_argument("--bind-base", default=None)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--timeout-ms", type=int, default=5000)
    args = p.parse_args(argv)

    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = train_digits.free_tcp_port()
    procs = [ctx.Process(target=_rank_main, args=(r, args.ranks, args, port, queue))
             for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    status = 0
    for _ in procs:
        rank, state, value = queue.get()
        if state != "ok":
            print(f"rank {rank} failed:\n{value}", file=sys.stderr)
            status = 1
            break
    for proc in procs:
        proc.join(timeout=10 if status == 0 else 1)
        if proc.is_alive():
            proc.kill()
    return status


if __name__ == "__main__":
    sys.exit(main())
