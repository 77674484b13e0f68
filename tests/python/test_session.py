"""inac_torch.Session against libinac_client and `inac ps --serve` on loopback: 4 ranks (spawned
processes), one PS, no switch (harness.LoopbackJob).

  - int32 all-reduces of several sizes in one session: exact (modulo 2^32), numbering continuous
  - float32: bitwise equal to the block floating point oracle (inac_torch.bfp) for the reported
    scale, saturation counted on a crafted input
  - bad input and errors: clear Python exceptions, never a crash
"""

import dataclasses
import os
import subprocess
import sys
import unittest

import harness
import numpy as np
import torch

import inac_torch
from inac_torch import bfp

WORLD = 4
INT_SIZES = [1, 61, 62, 63, 1000, 100000]
TIMEOUT_MS = 15000


def chunks(n):
    return -(-n // 62)


def open_session(job, rank):
    return inac_torch.open(job.job, job.worker(rank), config_file=job.config_file,
                           bind=job.address(rank), port=job.port, timeout_ms=TIMEOUT_MS)


# -- inputs, the same in the ranks and in the test ----------------------------------------------
def int_input(rank, call, n):
    g = torch.Generator().manual_seed(1000 * call + rank)
    return torch.randint(-(2**31), 2**31, (n,), generator=g, dtype=torch.int64).to(torch.int32)


def float_cases():
    return ["small", "ties", "zeros", "mixed", "saturate", "inf", "one"]


def float_input(rank, case):
    g = torch.Generator().manual_seed(77 + rank)
    if case == "small":
        return torch.randn(1000, generator=g) * 1e-3
    if case == "ties":
        # max |x| = 1 on rank 0 -> E = 1, s = 27 for 4 members: (k + 0.5) * 2^-27 are ties
        k = torch.randint(-1000, 1000, (63,), generator=g).to(torch.float32)
        x = (k + 0.5) * 2.0**-27
        if rank == 0:
            x[0] = 1.0
        return x
    if case == "zeros":
        return torch.zeros(10)
    if case == "mixed":
        scale = 10.0 ** (torch.rand(100000, generator=g) * 9 - 6)
        return torch.randn(100000, generator=g) * scale
    if case == "saturate":
        x = torch.full((64,), 0.7) * (rank + 1)
        x[5] = 3e9 if rank in (0, 1) else 0.0  # two clamped lanes: their sum wraps modulo 2^32
        if rank == 0:
            x[0], x[1], x[2], x[3], x[4] = 3e9, -3e9, float("nan"), 1.5, 2.5
        return x
    if case == "inf":
        # +-inf: E = 31, s = 0, clamped; +inf plus the others' lanes wraps to a negative sum
        x = torch.full((8,), 0.25 * (rank + 1))
        if rank == 0:
            x[0] = float("inf")
        if rank == 1:
            x[1] = float("-inf")
        return x
    if case == "one":
        return torch.tensor([-0.3 * (rank + 1)], dtype=torch.float32)
    raise ValueError(case)


# -- ranks ----------------------------------------------------------------------------------------
def rank_int32(rank, world, job):
    out = []
    with open_session(job, rank) as s:
        first = s.stats().next_chunk
        for call, n in enumerate(INT_SIZES):
            t = int_input(rank, call, n)
            r = s.allreduce_(t)
            out.append((t.numpy(), dataclasses.asdict(r), s.stats().next_chunk))
        stats = dataclasses.asdict(s.stats())
    return first, out, stats


def rank_float32(rank, world, job):
    out = []
    with open_session(job, rank) as s:
        first = s.stats().next_chunk
        for case in float_cases():
            t = float_input(rank, case)
            r = s.allreduce_(t)
            out.append((t.numpy(), dataclasses.asdict(r), s.stats().next_chunk))
        stats = dataclasses.asdict(s.stats())
    return first, out, stats


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.job = harness.LoopbackJob(net=201, workers=WORLD)
        self.addCleanup(self.job.cleanup)  # terminates the PS, also when a test fails
        self.job.start()

    def check_common(self, rank, first, out, stats, sizes, extra_chunks):
        expected_next = first
        for (_, r, next_chunk), n in zip(out, sizes):
            expected_next += chunks(n) + extra_chunks
            self.assertEqual(r["path"], "ps", r)
            self.assertEqual(r["lanes"], n, r)
            self.assertGreaterEqual(r["packets"], chunks(n), r)
            self.assertEqual(r["plan_version"], 1, r)
            self.assertEqual(next_chunk, expected_next, f"rank {rank}: numbering after {n}")
        self.assertEqual(stats["allreduces"], len(sizes))
        self.assertEqual(stats["failures"], 0)
        self.assertEqual(stats["lanes"], sum(sizes))

    def test_int32_exact_over_sizes(self):
        ranks = harness.run_ranks(rank_int32, WORLD, (self.job.spec(),), timeout_s=90)
        for call, n in enumerate(INT_SIZES):
            expected = bfp.wrap_sum([int_input(r, call, n) for r in range(WORLD)]).numpy()
            for rank, (first, out, stats) in enumerate(ranks):
                got, result, _ = out[call]
                self.assertIsNone(result["scale_bits"])
                self.assertEqual(result["saturated"], 0)
                np.testing.assert_array_equal(got, expected, err_msg=f"rank {rank}, {n} lanes")
        for rank, (first, out, stats) in enumerate(ranks):
            self.check_common(rank, first, out, stats, INT_SIZES, 0)

    def test_float32_equals_the_fixed_point_oracle(self):
        ranks = harness.run_ranks(rank_float32, WORLD, (self.job.spec(),), timeout_s=90)
        sizes = []
        for i, case in enumerate(float_cases()):
            inputs = [float_input(r, case) for r in range(WORLD)]
            sizes.append(inputs[0].numel())
            expected, s, saturated = bfp.allreduce(inputs, WORLD)
            for rank, (first, out, stats) in enumerate(ranks):
                got, result, _ = out[i]
                self.assertEqual(result["scale_bits"], s, f"{case}, rank {rank}: {result}")
                self.assertEqual(result["saturated"], saturated[rank], f"{case}, rank {rank}")
                np.testing.assert_array_equal(
                    got.view(np.uint32), expected.numpy().view(np.uint32),
                    err_msg=f"{case}, rank {rank}: not bitwise equal to the oracle (s={s})")
            if case == "ties":
                self.assertEqual(s, 27)
            if case == "saturate":
                self.assertEqual(s, 0)
                self.assertEqual(saturated, [4, 1, 0, 0])
                self.assertEqual(float(expected[5]), -2.0)  # 2 (2^31 - 1) modulo 2^32
                self.assertEqual(float(expected[3]), 2.0 + 1 + 2 + 3)  # 1.5 -> 2 (half even)
                self.assertEqual(float(expected[4]), 2.0 + 1 + 2 + 3)  # 2.5 -> 2
            if case == "inf":
                self.assertEqual((s, saturated), (0, [1, 1, 0, 0]))
                self.assertEqual(float(expected[0]), -(2.0**31))  # 2^31 - 1 + 0 + 1 + 1 wraps
        for rank, (first, out, stats) in enumerate(ranks):
            self.check_common(rank, first, out, stats, sizes, 1)
            self.assertEqual(stats["saturated"], [5, 2, 0, 0][rank])


class ErrorsTest(unittest.TestCase):
    """One process, no PS: what is refused before (or without) any packet."""

    def setUp(self):
        self.job = harness.LoopbackJob(net=202, workers=2)
        self.addCleanup(self.job.cleanup)

    def test_bad_tensors_raise_clear_exceptions(self):
        with open_session(self.job, 0) as s:
            with self.assertRaisesRegex(TypeError, "float32 or torch.int32.*float64"):
                s.allreduce_(torch.zeros(8, dtype=torch.float64))
            with self.assertRaisesRegex(TypeError, "float32 or torch.int32.*int64"):
                s.allreduce_(torch.zeros(8, dtype=torch.int64))
            with self.assertRaisesRegex(ValueError, "contiguous"):
                s.allreduce_(torch.zeros(8, 8).t())
            with self.assertRaisesRegex(ValueError, "contiguous"):
                s.allreduce_(torch.zeros(16)[::2])
            with self.assertRaisesRegex(ValueError, "requires grad"):
                s.allreduce_(torch.zeros(8, requires_grad=True))
            with self.assertRaisesRegex(TypeError, "torch.Tensor"):
                s.allreduce_([1.0, 2.0])
            with self.assertRaisesRegex(ValueError, "empty"):
                s.allreduce_(torch.zeros(0))
            with self.assertRaisesRegex(TypeError, "dense"):
                s.allreduce_(torch.zeros(4, 4).to_sparse())
            self.assertEqual(s.stats().allreduces, 0)
            with self.assertRaisesRegex(ValueError, "path must be"):
                s.report("switch")
            # A session from a configuration file without a server does not report.
            with self.assertRaises(inac_torch.InacError) as e:
                s.report("ps", "test")
            self.assertEqual(e.exception.status, "FAILED_PRECONDITION")
            self.assertIsInstance(e.exception, RuntimeError)
        self.assertTrue(s.closed)
        s.close()  # idempotent
        with self.assertRaises(inac_torch.InacError) as e:
            s.allreduce_(torch.zeros(8))
        self.assertEqual(e.exception.status, "FAILED_PRECONDITION")
        with self.assertRaises(inac_torch.InacError):
            s.stats()

    def test_open_errors(self):
        with self.assertRaises(inac_torch.InacError) as e:
            inac_torch.open(self.job.job, "nobody", config_file=self.job.config_file,
                            bind=self.job.address(0), port=self.job.port)
        self.assertEqual(e.exception.status, "INVALID_ARGUMENT", e.exception)
        self.assertIn("nobody", str(e.exception))
        with self.assertRaises(inac_torch.InacError) as e:
            inac_torch.open(self.job.job, "h0", config_file=self.job.config_file + ".missing",
                            bind=self.job.address(0), port=self.job.port)
        self.assertEqual(e.exception.status, "NOT_FOUND", e.exception)
        with self.assertRaises(inac_torch.InacError) as e:  # job_id of the file is 7
            inac_torch.open(self.job.job + 1, "h0", config_file=self.job.config_file,
                            bind=self.job.address(0), port=self.job.port)
        self.assertNotEqual(e.exception.status, "OK")
        with self.assertRaises(ValueError):
            inac_torch.open(0, "h0")
        with self.assertRaises(TypeError):
            inac_torch.open(7, None)

    def test_hook_state_checks_the_timeout(self):
        with open_session(self.job, 0) as s:
            with self.assertRaisesRegex(ValueError, "timeout_ms"):
                inac_torch.HookState(s, fallback_timeout_ms=TIMEOUT_MS + 1)
            state = inac_torch.HookState(s, fallback_timeout_ms=TIMEOUT_MS)
            self.assertEqual(state.fallback_timeout_ms, TIMEOUT_MS)
            state.close()  # does not own the session
            self.assertFalse(s.closed)

    def test_library_not_found_is_a_clear_error(self):
        env = dict(os.environ, INAC_CLIENT_LIB="/nonexistent/libinac_client.so")
        code = ("import inac_torch\n"
                "try:\n"
                "    inac_torch.open(7, 'h0')\n"
                "except inac_torch.InacError as e:\n"
                "    print(e.status, e)\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("NOT_FOUND", out.stdout)
        self.assertIn("/nonexistent/libinac_client.so", out.stdout)


if __name__ == "__main__":
    unittest.main()
