"""The collective fallback of inac_torch.comm_hook: whatever goes wrong on one rank, every rank
takes the same decision per bucket (a status all-reduce over Gloo), training finishes, the
weights stay equal on every rank, nothing hangs.

  - one rank's session uses a port nobody serves: every INAC all-reduce times out, every bucket
    falls back (and after 2 failures in a row the next buckets skip INAC); the weights equal
    plain DDP's bit for bit (the fallback is DDP's default all-reduce)
  - one rank is late (by 1.3 s) for one bucket (HookState.test_delay): the others time out, all
    fall back for that bucket only, then continue over INAC; the reports say ps, fallback, ps
  - one rank has no session (open failed): no rank calls INAC, no timeout is waited for
"""

import time
import unittest

import harness
import numpy as np

import inac_torch
import train_digits

WORLD = 4


def rank_train(rank, world, spec, url, steps, case, timeout_ms, unserved_port):
    data = train_digits.load_digits(0)
    port = spec.port
    worker = spec.worker(rank)
    if case == "port" and rank == world - 1:
        port = unserved_port
    if case == "no-session" and rank == 1:
        worker = "nobody"  # not a member: the open fails
    state = inac_torch.HookState.open(spec.job, worker, server=url, bind=spec.address(rank),
                                      port=port, fallback_timeout_ms=timeout_ms,
                                      skip_after_failures=2, skip_buckets=4)
    if case == "late" and rank == 2:
        state.test_delay = (3, timeout_ms / 1000 + 0.3)
    start = time.monotonic()
    r = train_digits.train(rank, world, steps=steps, hook=inac_torch.comm_hook,
                           hook_state=state, data=data)
    r["seconds"] = time.monotonic() - start
    r["hook"] = state.summary()
    r["last_result"] = state.last_result
    r["stats"] = state.session.stats() if state.session else None
    state.close()
    if case == "port":
        r["gloo"] = train_digits.train(rank, world, steps=steps, data=data)
    return r


class FallbackTest(unittest.TestCase):
    def setUp(self):
        self.job = harness.LoopbackJob(net=206, workers=WORLD)
        self.addCleanup(self.job.cleanup)
        self.job.start()
        self.controller = harness.FakeController(self.job.config)
        self.controller.__enter__()
        self.addCleanup(self.controller.__exit__)

    def run_case(self, case, steps, timeout_ms):
        unserved = harness.free_udp_port([self.job.ps_address, self.job.address(WORLD - 1)])
        ranks = harness.run_ranks(
            rank_train, WORLD,
            (self.job.spec(), self.controller.url, steps, case, timeout_ms, unserved),
            timeout_s=120, process_group=True)
        for rank, r in enumerate(ranks):
            print(f"\n{case} rank {rank}: {r['seconds']:.2f} s, hook {r['hook']}")
            self.assertEqual(r["hook"]["buckets"], ranks[0]["hook"]["buckets"])
            self.assertEqual(r["hook"]["fallbacks"], ranks[0]["hook"]["fallbacks"],
                             f"rank {rank} decided differently")
            for w0, w in zip(ranks[0]["weights"], r["weights"]):
                np.testing.assert_array_equal(w, w0, f"rank {rank}: weights differ from rank 0")
        return ranks

    def reports_of(self, worker):
        return [r for r in self.controller.reports if r["worker"] == worker]

    def test_unserved_port_on_one_rank_all_ranks_fall_back(self):
        steps = 12
        ranks = self.run_case("port", steps, timeout_ms=300)
        for rank, r in enumerate(ranks):
            hook = r["hook"]
            self.assertEqual(hook["buckets"], steps)
            self.assertEqual(hook["fallbacks"], steps)
            self.assertEqual(hook["ina_buckets"], 0)
            self.assertEqual(hook["last_path"], "fallback")
            self.assertEqual(r["last_result"].path, "fallback")
            self.assertIsNone(r["last_result"].scale_bits)
            self.assertIn("skipping INAC for 4 buckets", hook["last_reason"])
            # INAC tried buckets 0, 1, (2-5 skipped), 6, 7, (8-11 skipped): 4 timeouts.
            self.assertEqual((r["stats"].allreduces, r["stats"].failures), (0, 4), r["stats"])
            self.assertLess(r["seconds"], 20)
            # The fallback is DDP's default all-reduce: the same weights as plain DDP.
            for wf, wg in zip(r["weights"], r["gloo"]["weights"]):
                np.testing.assert_array_equal(wf, wg, f"rank {rank}: fallback != plain DDP")
            reports = self.reports_of(f"h{rank}")
            self.assertGreaterEqual(len(reports), 1)
            self.assertEqual(reports[0]["path"], "fallback", reports)
            self.assertEqual(reports[0]["allreduces"], 1)
            self.assertEqual(reports[0]["fallbacks"], 1)
            self.assertTrue(reports[0].get("reason"), reports)
        self.assertIn("TIMEOUT", ranks[WORLD - 1]["hook"]["last_reason"])

    def test_one_late_rank_fails_one_bucket_everywhere(self):
        steps = 10
        ranks = self.run_case("late", steps, timeout_ms=1000)
        for rank, r in enumerate(ranks):
            hook = r["hook"]
            self.assertEqual((hook["buckets"], hook["fallbacks"], hook["ina_buckets"]),
                             (steps, 1, steps - 1), f"rank {rank}")
            self.assertEqual(hook["last_path"], "ps")
            self.assertEqual(r["last_result"].path, "ps")
            self.assertTrue(hook["last_reason"])
            reports = [(x["path"], x["allreduces"], x["fallbacks"])
                       for x in self.reports_of(f"h{rank}")]
            # first bucket, the change to fallback, the change back, close()
            self.assertEqual(reports, [("ps", 1, 0), ("fallback", 4, 1), ("ps", 5, 1),
                                       ("ps", steps, 1)], f"rank {rank}")
            self.assertIn("TIMEOUT", self.reports_of(f"h{rank}")[1]["reason"])
        self.assertIn("TIMEOUT", ranks[0]["hook"]["last_reason"])

    def test_no_session_on_one_rank_no_rank_calls_inac(self):
        steps = 20
        ranks = self.run_case("no-session", steps, timeout_ms=5000)
        for rank, r in enumerate(ranks):
            hook = r["hook"]
            self.assertEqual((hook["buckets"], hook["fallbacks"]), (steps, steps))
            self.assertIn("no INAC session on rank 1", hook["last_reason"])
            self.assertLess(r["seconds"], 5, "waited for a timeout")  # 5 s is one timeout
            if rank != 1:
                self.assertEqual((r["stats"].allreduces, r["stats"].failures), (0, 0))
                reports = [(x["path"], x["allreduces"], x["fallbacks"])
                           for x in self.reports_of(f"h{rank}")]
                self.assertEqual(reports, [("fallback", 1, 1), ("fallback", steps, steps)])
        self.assertIsNone(ranks[1]["stats"])


if __name__ == "__main__":
    unittest.main()
