"""inac_torch.bfp: the block floating point rule of inac_allreduce_f32, on hand-checked cases.
No library, no PS."""

import math
import os
import tempfile
import unittest

import harness  # noqa: F401  (sys.path)
import torch

from inac_torch import bfp

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)


def f32(values):
    return torch.tensor(values, dtype=torch.float32)


class ExponentTest(unittest.TestCase):
    def test_frexp_exponent_of_max_abs(self):
        self.assertEqual(bfp.exponent(f32([1.0])), 1)        # 1 = 0.5 * 2^1
        self.assertEqual(bfp.exponent(f32([0.75, -0.1])), 0)
        self.assertEqual(bfp.exponent(f32([0.1, -1.0])), 1)  # the absolute value
        self.assertEqual(bfp.exponent(f32([3.0, -4.0])), 3)  # 4 = 0.5 * 2^3
        self.assertEqual(bfp.exponent(f32([1e6])), math.frexp(1e6)[1])

    def test_bounds(self):
        self.assertEqual(bfp.exponent(f32([0.0, -0.0])), -30)
        self.assertEqual(bfp.exponent(f32([])), -30)
        self.assertEqual(bfp.exponent(f32([1e-20])), -30)   # e = -66 < -30
        self.assertEqual(bfp.exponent(f32([2.0**-31])), -30)  # e = -30 exactly
        self.assertEqual(bfp.exponent(f32([3e9])), 31)      # e = 32 > 31
        self.assertEqual(bfp.exponent(f32([2.0**30])), 31)  # e = 31 exactly

    def test_nan_ignored(self):
        self.assertEqual(bfp.exponent(f32([float("nan"), 0.25])), -1)
        self.assertEqual(bfp.exponent(f32([float("nan")])), -30)


class ScaleTest(unittest.TestCase):
    def test_scale_bits(self):
        self.assertEqual(bfp.scale_bits(1, 4), 27)   # 30 - 1 - 2
        self.assertEqual(bfp.scale_bits(1, 1), 29)
        self.assertEqual(bfp.scale_bits(1, 2), 28)
        self.assertEqual(bfp.scale_bits(1, 3), 27)   # ceil(log2 3) = 2
        self.assertEqual(bfp.scale_bits(1, 5), 26)   # ceil(log2 5) = 3
        self.assertEqual(bfp.scale_bits(-30, 4), 58)
        self.assertEqual(bfp.scale_bits(-30, 1), 60)
        self.assertEqual(bfp.scale_bits(31, 4), 0)   # clamped
        self.assertEqual(bfp.scale_bits(-40, 1), 62)  # clamped

    def test_no_overflow_by_construction(self):
        # n members at the largest magnitude the exponent allows never overflow int32.
        for n in (1, 2, 3, 4, 7, 8, 255):
            for e in (-30, -3, 0, 5, 20):
                s = bfp.scale_bits(e, n)
                x = torch.full((1,), math.nextafter(2.0**e, 0), dtype=torch.float32)
                lanes, sat = bfp.quantize(x, s)
                self.assertEqual(sat, 0)
                self.assertLessEqual(int(lanes[0]) * n, INT32_MAX, (n, e))


class QuantizeTest(unittest.TestCase):
    def test_round_half_to_even(self):
        lanes, sat = bfp.quantize(f32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997]), 0)
        self.assertEqual(lanes.tolist(), [0, 2, 2, 0, -2, -2, 0])
        self.assertEqual(sat, 0)
        lanes, _ = bfp.quantize(f32([0.375, 0.625]), 2)  # 1.5, 2.5
        self.assertEqual(lanes.tolist(), [2, 2])

    def test_saturation(self):
        x = f32([3e9, -3e9, float("nan"), 2.0**31, -(2.0**31), float("inf"), 1.0])
        lanes, sat = bfp.quantize(x, 0)
        self.assertEqual(lanes.tolist(), [INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN,
                                          INT32_MAX, 1])
        self.assertEqual(sat, 5)  # 3e9, -3e9, NaN, 2^31, inf; -2^31 fits

    def test_wrap_and_dequantize(self):
        s = bfp.wrap_sum([torch.tensor([INT32_MAX, 5], dtype=torch.int32),
                          torch.tensor([1, -7], dtype=torch.int32)])
        self.assertEqual(s.tolist(), [INT32_MIN, -2])
        self.assertEqual(bfp.dequantize(torch.tensor([3, -4], dtype=torch.int32), 2).tolist(),
                         [0.75, -1.0])
        # float32(sum) rounds first: 2^24 + 1 is not a float32
        self.assertEqual(bfp.dequantize(torch.tensor([2**24 + 1], dtype=torch.int32), 0)
                         .tolist(), [2.0**24])

    def test_allreduce_close_to_the_sum(self):
        g = torch.Generator().manual_seed(3)
        for n in (1, 2, 3, 4):
            xs = [torch.randn(1000, generator=g) * 10 for _ in range(n)]
            result, s, sat = bfp.allreduce(xs)
            exact = torch.stack([x.double() for x in xs]).sum(0)
            self.assertEqual(sat, [0] * n)
            self.assertLessEqual(float((result.double() - exact).abs().max()),
                                 n * 0.5 * 2.0**-s + 1e-6 * float(exact.abs().max()))


class GlooHookTest(unittest.TestCase):
    def test_one_rank_process_group(self):
        import torch.distributed as dist

        with tempfile.TemporaryDirectory() as d:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "store"),
                                    rank=0, world_size=1)
            try:
                x = torch.randn(300, generator=torch.Generator().manual_seed(1)) * 1e-3
                expected, s, sat = bfp.allreduce([x])
                y = x.clone()
                self.assertEqual(bfp.gloo_allreduce_(y), (s, sat[0]))
                self.assertTrue(torch.equal(y.view(torch.int32), expected.view(torch.int32)))
            finally:
                dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
