"""DistributedDataParallel with inac_torch.comm_hook: 4 ranks train the MLP of
examples/pytorch/train_digits.py (64-32-10, SGD, 200 steps) three times on one Gloo process
group: plain DDP (Gloo), INAC (`inac ps --serve` on loopback, the configuration from a fake
controller that also records the data-path reports) and the fixed-point oracle
(inac_torch.bfp.gloo_hook: the same rule, int32 sums by Gloo).

  - INAC's final loss within 2e-3 of Gloo's, test accuracy within one sample
  - INAC's weights bitwise equal to the oracle's, and equal on every rank
  - every bucket over INAC (no fallback), reported to the controller once per worker
"""

import unittest

import harness
import numpy as np

import inac_torch
import train_digits

WORLD = 4
STEPS = 200


def rank_train(rank, world, spec, url, steps):
    data = train_digits.load_digits(0)
    out = {}
    for backend in ("gloo", "inac", "bfp"):
        state, hook = None, None
        if backend == "inac":
            state = inac_torch.HookState.open(spec.job, spec.worker(rank), server=url,
                                              bind=spec.address(rank), port=spec.port,
                                              fallback_timeout_ms=20000)
            hook = inac_torch.comm_hook
        elif backend == "bfp":
            hook = inac_torch.bfp.gloo_hook
        r = train_digits.train(rank, world, steps=steps, hook=hook, hook_state=state, data=data)
        if state is not None:
            r["hook"] = state.summary()
            r["open_error"] = str(state.open_error) if state.open_error else None
            r["last_result"] = state.last_result
            r["stats"] = state.session.stats() if state.session else None
            state.close()
        out[backend] = r
    return out


def max_diff(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


class DdpTest(unittest.TestCase):
    def setUp(self):
        self.job = harness.LoopbackJob(net=205, workers=WORLD)
        self.addCleanup(self.job.cleanup)
        self.job.start()
        self.controller = harness.FakeController(self.job.config)
        self.controller.__enter__()
        self.addCleanup(self.controller.__exit__)

    def test_training_over_inac_equals_the_oracle_and_matches_gloo(self):
        ranks = harness.run_ranks(rank_train, WORLD,
                                  (self.job.spec(), self.controller.url, STEPS),
                                  timeout_s=180, process_group=True)
        gloo, inac, oracle = (ranks[0][b] for b in ("gloo", "inac", "bfp"))
        print(f"\nfinal loss gloo {gloo['final_loss']:.6f} inac {inac['final_loss']:.6f} "
              f"oracle {oracle['final_loss']:.6f}; test accuracy gloo {gloo['correct']}/"
              f"{gloo['test_size']} inac {inac['correct']}/{inac['test_size']}; "
              f"max |w_inac - w_gloo| {max_diff(inac['weights'], gloo['weights']):.3g}; "
              f"step ms (median) gloo {np.median(gloo['step_ms'][5:]):.2f} inac "
              f"{np.median(inac['step_ms'][5:]):.2f} oracle "
              f"{np.median(oracle['step_ms'][5:]):.2f}; hook {inac['hook']}")
        self.assertIsNone(inac["open_error"])
        self.assertLess(gloo["final_loss"], 1.0)  # it learnt something
        self.assertLessEqual(abs(inac["final_loss"] - gloo["final_loss"]), 2e-3)
        self.assertLessEqual(abs(inac["correct"] - gloo["correct"]), 1)
        for rank, r in enumerate(ranks):
            hook = r["inac"]["hook"]
            self.assertEqual(hook["fallbacks"], 0, f"rank {rank}: {hook}")
            self.assertEqual(hook["ina_buckets"], hook["buckets"], f"rank {rank}: {hook}")
            self.assertGreaterEqual(hook["buckets"], STEPS)
            self.assertEqual(hook["saturated"], 0)
            self.assertEqual(hook["last_path"], "ps")
            self.assertEqual(r["inac"]["last_result"].path, "ps")
            self.assertIsNotNone(r["inac"]["last_result"].scale_bits)
            self.assertEqual(r["inac"]["stats"].allreduces, hook["buckets"])
            self.assertEqual(r["inac"]["stats"].failures, 0)
            for backend in ("gloo", "inac", "bfp"):
                for w0, w in zip(ranks[0][backend]["weights"], r[backend]["weights"]):
                    np.testing.assert_array_equal(w, w0, f"{backend}: rank {rank} != rank 0")
            for wi, wo in zip(r["inac"]["weights"], r["bfp"]["weights"]):
                np.testing.assert_array_equal(wi.view(np.uint32), wo.view(np.uint32),
                                              f"rank {rank}: INAC != fixed-point oracle")
        # The data path, reported on the first bucket (then at most every 60 s) and at the
        # end: "ps".
        for rank, r in enumerate(ranks):
            reports = [(x["path"], x["allreduces"], x["fallbacks"], x.get("reason"))
                       for x in self.controller.reports if x["worker"] == f"h{rank}"]
            buckets = r["inac"]["hook"]["buckets"]
            self.assertEqual(reports, [("ps", 1, 0, None), ("ps", buckets, 0, None)])
        self.assertIn(("GET", f"/api/v1/jobs/{self.job.job}/config"), self.controller.requests)


if __name__ == "__main__":
    unittest.main()
