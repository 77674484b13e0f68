#!/usr/bin/env python3
"""DistributedDataParallel training of a small MLP (64-32-10) on scikit-learn's digits, with the
gradients all-reduced through INAC (inac_torch.comm_hook) or plain Gloo. See README.md here and
docs/pytorch.md.

  # N ranks on this machine (torch.multiprocessing), each a member h<rank> of job 7:
  python3 train_digits.py --backend inac --ranks 4 --job 7 --bind-base 127.0.0.11
  python3 train_digits.py --backend gloo --ranks 4
  python3 train_digits.py --backend gloo,inac,bfp --ranks 4 --job 7 ...   # compare, one launch
  # through a switch of an `inac lab` (rank r's session in the host namespace lab-h<r>):
  python3 train_digits.py --backend inac,bfp --ranks 4 --job 1 --netns-format 'lab-h{rank}'

  # one rank per process under torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT from torchrun):
  torchrun --nproc_per_node 4 train_digits.py --backend inac --job 7 --bind-base 127.0.0.11

Backends: gloo (DDP's default all-reduce), inac (inac_torch.comm_hook: INAC, falling back on
Gloo collectively), bfp (inac_torch.bfp.gloo_hook: INAC's block floating point rule with the
int32 sums made by Gloo; the weights equal the inac run's, bit for bit).

Deterministic: the same seed gives the same initial weights, batches and (for a backend) weights.
"""

import argparse
import collections
import dataclasses
import datetime
import hashlib
import ipaddress
import json
import os
import socket
import statistics
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO_PYTHON = os.path.normpath(os.path.join(_HERE, "..", "..", "python"))
if os.path.isdir(os.path.join(_REPO_PYTHON, "inac_torch")) and _REPO_PYTHON not in sys.path:
    sys.path.insert(0, _REPO_PYTHON)  # the checkout's inac_torch, when run from the repository

BACKENDS = ("gloo", "inac", "bfp")


# -- data and model -----------------------------------------------------------------------------
def load_digits(seed=0, test_size=450):
    """(x_train, y_train, x_test, y_test) of sklearn's digits (1797 8x8 images), scaled to
    [0, 1], split by a permutation of `seed`."""
    from sklearn.datasets import load_digits as sk_load_digits

    data = sk_load_digits()
    x = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.int64)
    order = torch.tensor(np.random.RandomState(seed).permutation(len(y)))
    test, train = order[:test_size], order[test_size:]
    return x[train], y[train], x[test], y[test]


def make_model(seed=0, hidden=32):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def batch_indices(step, n_train, batch, seed):
    """The global batch of `step`: a slice of the permutation of its epoch."""
    per_epoch = n_train // batch
    epoch, i = divmod(step, per_epoch)
    order = np.random.RandomState(seed * 1000003 + epoch).permutation(n_train)
    return order[i * batch:(i + 1) * batch]


# -- one rank -----------------------------------------------------------------------------------
def train(rank, world, *, steps=200, batch=64, lr=0.1, seed=0, hook=None, hook_state=None,
          log_every=0, out=print, data=None, hidden=32):
    """Trains on an initialised process group and returns a dict: losses (this rank's
    minibatch loss per step), final_loss (cross-entropy of the whole training set), correct /
    test_size / accuracy (test set), step_ms (per step), weights (numpy arrays).

    hook/hook_state: a DDP communication hook and its state (None: DDP's default all-reduce).
    `batch` is global; each rank trains on its batch // world examples."""
    if batch % world:
        raise ValueError(f"--batch {batch} is not a multiple of the {world} ranks")
    x_train, y_train, x_test, y_test = data if data is not None else load_digits(seed)
    model = make_model(seed, hidden)
    ddp = DDP(model)
    if hook is not None:
        ddp.register_comm_hook(hook_state, hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    per_rank = batch // world
    losses, step_ms = [], []
    for step in range(steps):
        idx = batch_indices(step, len(y_train), batch, seed)[rank * per_rank:(rank + 1) * per_rank]
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x_train[idx]), y_train[idx])
        loss.backward()  # DDP all-reduces the gradient buckets here
        optimizer.step()
        step_ms.append((time.perf_counter() - start) * 1e3)
        losses.append(float(loss))
        if log_every and (step % log_every == 0 or step == steps - 1) and out:
            out(f"rank {rank} step {step:4d} loss {losses[-1]:.4f} {step_ms[-1]:.2f} ms")
    with torch.no_grad():
        final_loss = float(loss_fn(model(x_train), y_train))
        correct = int((model(x_test).argmax(dim=1) == y_test).sum())
    return {
        "losses": losses,
        "final_loss": final_loss,
        "correct": correct,
        "test_size": len(y_test),
        "accuracy": correct / len(y_test),
        "step_ms": step_ms,
        "weights": [p.detach().numpy().copy() for p in model.parameters()],
    }


def worker_id(args, rank):
    return args.worker_format.format(rank=rank)


def netns_name(args, rank):
    """The network namespace rank r opens its INAC session in (--netns-format), or None."""
    if not args.netns_format:
        return None
    return args.netns_format.format(rank=rank, worker=worker_id(args, rank))


def weights_sha256(weights):
    """SHA-256 of the weights' bytes, in parameter order (equal hashes: bitwise equal weights)."""
    h = hashlib.sha256()
    for w in weights:
        h.update(w.tobytes())
    return h.hexdigest()


def bind_address(args, rank):
    if args.bind_base:
        return str(ipaddress.IPv4Address(args.bind_base) + rank)
    return args.bind


def run_rank(rank, world, args, out=print):
    """One rank: every backend of --backend in turn on one process group; returns
    {backend: train()'s dict (+ "hook": the HookState's counts for inac)}."""
    import inac_torch

    torch.set_num_threads(args.threads)
    results = {}
    for backend in args.backend.split(","):
        state, hook, session_stats = None, None, None
        paths = collections.Counter()  # inac: the path of each bucket ("ina", "ps", "fallback")
        if backend == "inac":
            state = inac_torch.HookState.open(
                args.job, worker_id(args, rank), fallback_timeout_ms=args.timeout_ms,
                report_every_s=args.report_every_s, server=args.server, token=args.token,
                config_file=args.config_file, bind=bind_address(args, rank), port=args.port,
                netns=netns_name(args, rank))

            def hook(hook_state, bucket):
                future = inac_torch.comm_hook(hook_state, bucket)
                paths[hook_state.last_path] += 1
                return future
        elif backend == "bfp":
            hook = inac_torch.bfp.gloo_hook
        dist.barrier()
        try:
            r = train(rank, world, steps=args.steps, batch=args.batch, lr=args.lr,
                      seed=args.seed, hook=hook, hook_state=state, hidden=args.hidden,
                      log_every=args.log_every if rank == 0 else 0, out=out)
        finally:
            if state is not None:
                if state.session is not None and not state.session.closed:
                    session_stats = dataclasses.asdict(state.session.stats())
                state.close()
        if state is not None:
            r["hook"] = state.summary()
            r["paths"] = dict(paths)
            r["session"] = session_stats
        results[backend] = r
    return results


# -- launchers ----------------------------------------------------------------------------------
def _spawned_rank(rank, world, args, master_port, queue):
    try:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{master_port}",
                                rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=args.gloo_timeout_s))
        queue.put((rank, "ok", run_rank(rank, world, args)))
        dist.destroy_process_group()
    except BaseException:
        queue.put((rank, "error", traceback.format_exc()))


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(args, world, timeout_s=None):
    """Runs `world` ranks on this machine (spawned processes, Gloo over loopback) and returns
    their run_rank() results, by rank. Raises RuntimeError when a rank fails or the run takes
    longer than timeout_s (the ranks are then killed)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_tcp_port()
    procs = [ctx.Process(target=_spawned_rank, args=(r, world, args, port, queue), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    results, errors = {}, {}
    try:
        while len(results) + len(errors) < world:
            wait = None if deadline is None else max(0.1, deadline - time.monotonic())
            try:
                rank, status, value = queue.get(timeout=min(wait or 1.0, 1.0))
            except Exception:  # queue.Empty
                if deadline is not None and time.monotonic() > deadline:
                    raise RuntimeError(f"ranks {sorted(set(range(world)) - set(results))} did "
                                       f"not finish within {timeout_s} s")
                dead = [i for i, p in enumerate(procs)
                        if p.exitcode not in (None, 0) and i not in results and i not in errors]
                if dead:
                    raise RuntimeError(f"ranks {dead} died (exit codes "
                                       f"{[procs[i].exitcode for i in dead]})")
                continue
            (results if status == "ok" else errors)[rank] = value
            if errors:
                break
    finally:
        for p in procs:
            p.join(timeout=5 if not errors else 0.5)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        rank = min(errors)
        raise RuntimeError(f"rank {rank} failed:\n{errors[rank]}")
    return [results[r] for r in range(world)]


def summarize(per_rank, out=print):
    """Prints loss, accuracy and per-step time of rank 0 per backend, and the largest weight
    difference between backends. Returns the table as a dict."""
    rows = {}
    for backend, r in per_rank[0].items():
        steady = r["step_ms"][5:] or r["step_ms"]
        rows[backend] = {
            "final_loss": r["final_loss"], "accuracy": r["accuracy"], "correct": r["correct"],
            "test_size": r["test_size"], "step_ms_median": statistics.median(steady),
            "step_ms_mean": statistics.fmean(steady), "hook": r.get("hook"),
            "step_ms_max": max(r["step_ms"], default=0.0), "steps": len(r["step_ms"]),
            "weights_sha256": weights_sha256(r["weights"]),
        }
        if "paths" in r:  # inac: bucket paths of rank 0, the session counters of every rank
            rows[backend]["paths"] = r["paths"]
            rows[backend]["sessions"] = [ranks[backend].get("session") for ranks in per_rank]
        out(f"{backend:5s} final loss {r['final_loss']:.6f}  test accuracy {r['accuracy']:.4f} "
            f"({r['correct']}/{r['test_size']})  step {rows[backend]['step_ms_median']:.3f} ms "
            f"median, {rows[backend]['step_ms_mean']:.3f} ms mean"
            + (f"  hook {r['hook']}" if r.get("hook") else ""))
    backends = list(per_rank[0])
    for i, a in enumerate(backends):
        for b in backends[i + 1:]:
            diff = max(float(np.max(np.abs(wa - wb))) for wa, wb in
                       zip(per_rank[0][a]["weights"], per_rank[0][b]["weights"]))
            out(f"max |weight({a}) - weight({b})| = {diff:.3g}")
            rows[f"{a}-{b}"] = diff
    same = all(np.array_equal(wa, wb) for r in per_rank[1:] for backend in backends
               for wa, wb in zip(per_rank[0][backend]["weights"], r[backend]["weights"]))
    out(f"weights equal on every rank: {same}")
    rows["ranks_agree"] = same
    return rows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="inac",
                   help="inac, gloo or bfp, or a comma-separated list run one after the other")
    p.add_argument("--ranks", type=int, default=4,
                   help="ranks to spawn on this machine (ignored under torchrun)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64, help="global batch size")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", type=int, default=32, help="hidden units (64-H-10 MLP)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--log-every", type=int, default=50, help="rank 0 prints every N steps")
    p.add_argument("--job", type=int, help="the INAC job id (inac)")
    p.add_argument("--worker-format", default="h{rank}",
                   help="this rank's host id in the job, {rank} replaced (default h{rank})")
    p.add_argument("--server", default=None, help="controller URL (default $INAC_SERVER)")
    p.add_argument("--token", default=None, help="bearer token (default $INAC_TOKEN)")
    p.add_argument("--config-file", default=None,
                   help="the job configuration JSON instead of asking the controller")
    p.add_argument("--bind", default=None, help="data-plane address of every rank")
    p.add_argument("--bind-base", default=None,
                   help="rank r binds this IPv4 address + r (several ranks on one machine)")
    p.add_argument("--port", type=int, default=None, help="UDP port (default 48864)")
    p.add_argument("--netns-format", default=None,
                   help="rank r opens its INAC session in this network namespace, {rank} and "
                        "{worker} replaced (e.g. lab-h{rank}; default: the process's own)")
    p.add_argument("--timeout-ms", type=int, default=5000,
                   help="an INAC all-reduce without a new result this long falls back on Gloo")
    p.add_argument("--report-every-s", type=float, default=60.0)
    p.add_argument("--gloo-timeout-s", type=float, default=300.0)
    p.add_argument("--timeout-s", type=float, default=None,
                   help="spawned ranks: fail the run and kill them after this long (default: "
                        "no limit)")
    p.add_argument("--json", default=None, help="write the summary as JSON to this file")
    args = p.parse_args(argv)
    for b in args.backend.split(","):
        if b not in BACKENDS:
            p.error(f"unknown backend {b!r} (one of {', '.join(BACKENDS)})")
    if "inac" in args.backend.split(",") and args.job is None:
        p.error("--backend inac needs --job")
    return args


def main(argv=None):
    args = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo",
                                timeout=datetime.timedelta(seconds=args.gloo_timeout_s))
        rank, world = dist.get_rank(), dist.get_world_size()
        results = run_rank(rank, world, args)
        gathered = [None] * world
        dist.all_gather_object(gathered, results)
        dist.destroy_process_group()
    else:
        gathered = spawn(args, args.ranks, timeout_s=args.timeout_s)
        rank = 0
    if rank == 0:
        rows = summarize(gathered)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
