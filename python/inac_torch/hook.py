"""A DistributedDataParallel communication hook over INAC, with a collective fallback.

    state = inac_torch.HookState.open(job, worker, fallback_timeout_ms=5000)
    ddp.register_comm_hook(state, inac_torch.comm_hook)

Per bucket: keep a copy; session.allreduce_ (float32 block floating point); then a tiny status
all-reduce (MAX of one int32 per rank: 0 ok, 1 failed, 2 no usable session) over the process
group, so every rank takes the same decision; if any rank failed, every rank restores its copy
and all-reduces the bucket on the process group (Gloo), as DDP's default hook does. The result is
divided by the world size, as DDP's default hook does. See docs/pytorch.md.
"""

import logging
import time

import torch
import torch.distributed as dist

from ._clib import InacError
from .session import Result
from .session import open as _open_session

log = logging.getLogger("inac_torch")

OK = 0
FAILED = 1
NO_SESSION = 2

_MAX_REASON_CHARS = 256  # what POST /jobs/{id}/data-path accepts


def _clean_reason(text):
    """Printable, at most 256 UTF-8 bytes (so also 256 characters), cut at a character."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    data = text.encode("utf-8")
    if len(data) <= _MAX_REASON_CHARS:
        return text
    return data[:_MAX_REASON_CHARS - 3].decode("utf-8", "ignore") + "..."


def _ranks(ranks):
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(str(r) for r in ranks)


class HookState:
    """The state of comm_hook: the session, the process group and the counts.

    session: an open inac_torch.Session, or None (every bucket then falls back).
    process_group: the group DDP all-reduces over (None: the default group); every rank of it
      must be a member of the job and use the same hook.
    fallback_timeout_ms: how long an all-reduce may go without a new result before it fails and
      the bucket falls back. It is the session's timeout_ms (HookState.open opens the session
      with it; a given session must have been opened with it).
    report_every_s: report the data path to the controller on the first bucket, on every change
      of path or reason, otherwise at most this often, and on close().
    skip_after_failures, skip_buckets: after this many failed buckets in a row, send the next
      skip_buckets buckets straight to the fallback (every rank decides the same from the
      status all-reduces), then try INAC again. None or 0: never skip.

    Counts: buckets, ina_buckets, fallbacks, saturated (lanes clamped by the block floating
    point rule), last_path ("ina", "ps" or "fallback"), last_reason (of the latest fallback),
    last_result (a Result; path "fallback" for a bucket that fell back), reports and
    report_failures.
    """

    def __init__(self, session, process_group=None, *, fallback_timeout_ms=None,
                 report_every_s=60.0, skip_after_failures=3, skip_buckets=100):
        if (fallback_timeout_ms is not None and session is not None and
                session.timeout_ms != fallback_timeout_ms):
            raise ValueError(
                f"fallback_timeout_ms={fallback_timeout_ms} but the session was opened with "
                f"timeout_ms={session.timeout_ms}: open it with timeout_ms={fallback_timeout_ms} "
                "(or use HookState.open)")
        self.session = session
        self.process_group = process_group
        self.fallback_timeout_ms = session.timeout_ms if session is not None else \
            fallback_timeout_ms
        self.report_every_s = report_every_s
        self.skip_after_failures = skip_after_failures
        self.skip_buckets = skip_buckets
        self.open_error = None  # the InacError of HookState.open, when it failed
        self.worker = session.worker if session is not None else None
        self.owns_session = False

        self.buckets = 0
        self.ina_buckets = 0
        self.fallbacks = 0
        self.saturated = 0
        self.last_path = None
        self.last_reason = None
        self.last_result = None
        self.reports = 0
        self.report_failures = 0

        # Testing only: (bucket index, seconds) delays this rank's INAC call of that bucket, so
        # that the other ranks time out (tests/python).
        self.test_delay = None

        self._preflight_done = False
        self._disabled = None  # reason, once some rank has no usable session (for good)
        self._failures_in_row = 0
        self._skip_left = 0
        self._skip_reason = None
        self._logged_kind = None
        self._report_key = None
        self._report_time = 0.0
        self._report_error_logged = False
        self._reported_counts = None
        self._saturation_logged = False

    @classmethod
    def open(cls, job, worker, process_group=None, *, fallback_timeout_ms=30000,
             report_every_s=60.0, skip_after_failures=3, skip_buckets=100, **open_kwargs):
        """Opens the session (inac_torch.open(job, worker, timeout_ms=fallback_timeout_ms,
        **open_kwargs)) and returns a HookState that owns it (close() closes it). When the open
        fails the state has no session (open_error says why) and every bucket falls back."""
        try:
            session = _open_session(job, worker, timeout_ms=fallback_timeout_ms, **open_kwargs)
            error = None
        except InacError as e:
            session, error = None, e
            log.warning("inac_torch: no INAC session for worker %s of job %s, DDP falls back on "
                        "the process group: %s", worker, job, e)
        state = cls(session, process_group, fallback_timeout_ms=fallback_timeout_ms,
                    report_every_s=report_every_s, skip_after_failures=skip_after_failures,
                    skip_buckets=skip_buckets)
        state.open_error = error
        state.owns_session = True
        state.worker = worker
        return state

    def close(self):
        """Reports the final counts to the controller (when they changed since the last
        report) and closes the session when the state owns it (HookState.open). Idempotent."""
        if self._usable() and self.buckets and self._reported_counts != (self.buckets,
                                                                         self.fallbacks):
            self._report(self.last_path, self.last_reason if self.last_path == "fallback"
                         else None)
        if self.owns_session and self.session is not None:
            self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def summary(self):
        return {
            "buckets": self.buckets, "ina_buckets": self.ina_buckets,
            "fallbacks": self.fallbacks, "saturated": self.saturated,
            "last_path": self.last_path, "last_reason": self.last_reason,
            "reports": self.reports, "report_failures": self.report_failures,
        }

    # -- the bucket --------------------------------------------------------------------------
    def _usable(self):
        return self.session is not None and not self.session.closed

    def _why_unusable(self):
        if self.session is None:
            return f"no session ({self.open_error})" if self.open_error else "no session"
        return "session closed"

    def _exchange(self, code, world, rank):
        codes = torch.zeros(world, dtype=torch.int32)
        codes[rank] = code
        dist.all_reduce(codes, op=dist.ReduceOp.MAX, group=self.process_group)
        return codes.tolist()

    def allreduce_bucket_(self, tensor):
        """Averages `tensor` (a DDP bucket) over the process group, in place: over INAC when
        every rank succeeds, otherwise over the process group's own all-reduce."""
        world = dist.get_world_size(self.process_group)
        rank = dist.get_rank(self.process_group)
        index = self.buckets
        self.buckets += 1

        if not self._preflight_done:
            # Once: does every rank have a session? If not, none calls INAC (a rank without a
            # session would leave the others waiting for fallback_timeout_ms on every bucket).
            self._preflight_done = True
            codes = self._exchange(OK if self._usable() else NO_SESSION, world, rank)
            missing = [r for r, c in enumerate(codes) if c]
            if missing:
                self._disabled = f"no INAC session on {_ranks(missing)}" + (
                    f": {self._why_unusable()}" if not self._usable() else "")
        if self._disabled is not None:
            return self._fallback(tensor, world, self._disabled, "no-session")
        # Every rank has the same buckets: a bucket INAC cannot carry falls back everywhere.
        if tensor.dtype != torch.float32 or tensor.device.type != "cpu" or \
                not tensor.is_contiguous():
            return self._fallback(tensor, world, f"bucket of {tensor.dtype} on {tensor.device}"
                                  " (INAC carries contiguous CPU float32 buckets)", "bucket")
        if self._skip_left > 0:
            self._skip_left -= 1
            return self._fallback(tensor, world, self._skip_reason, "backoff")

        copy = None
        result = None
        local = None  # (kind, reason) of this rank's failure
        if not self._usable():
            code = NO_SESSION
            local = ("no-session", f"{_ranks([rank])}: {self._why_unusable()}")
        else:
            copy = tensor.clone()
            if self.test_delay is not None and self.test_delay[0] == index:
                time.sleep(self.test_delay[1])
            try:
                result = self.session.allreduce_(tensor)
                code = OK
            except InacError as e:
                code = FAILED
                local = (e.status, f"{e.status}: {e.message}")
            except Exception as e:  # never leave the other ranks waiting in _exchange
                code = FAILED
                local = (type(e).__name__, f"{type(e).__name__}: {e}")
                log.exception("inac_torch: the INAC all-reduce of bucket %d raised", index)
        codes = self._exchange(code, world, rank)
        failed = [r for r, c in enumerate(codes) if c]
        if not failed:
            self._failures_in_row = 0
            self.ina_buckets += 1
            self.saturated += result.saturated
            if result.saturated and not self._saturation_logged:
                self._saturation_logged = True
                log.warning("inac_torch: %d gradient values clamped to int32 by the block "
                            "floating point rule (bucket %d; inf/NaN gradients?)",
                            result.saturated, index)
            self.last_result = result
            tensor.div_(world)
            self._note(result.path, None, None)
            return tensor

        if copy is not None:
            tensor.copy_(copy)  # partial sums (or a good sum other ranks lack): start over
        if any(c == NO_SESSION for c in codes):
            kind = "no-session"
            reason = local[1] if local and local[0] == "no-session" else \
                f"no INAC session on {_ranks([r for r, c in enumerate(codes) if c == 2])}"
            self._disabled = reason
        elif local is not None:
            kind, reason = local
        else:
            kind, reason = "peer", f"the INAC all-reduce failed on {_ranks(failed)}"
        self._failures_in_row += 1
        if (self._disabled is None and self.skip_after_failures and
                self._failures_in_row >= self.skip_after_failures and self.skip_buckets):
            self._skip_left = self.skip_buckets
            self._skip_reason = (f"skipping INAC for {self.skip_buckets} buckets after "
                                 f"{self._failures_in_row} failed in a row; last: {reason}")
            self._failures_in_row = 0
        return self._fallback(tensor, world, reason, kind)

    def _fallback(self, tensor, world, reason, kind):
        # DDP's default hook: divide, then all-reduce (sum) on the process group.
        tensor.div_(world)
        dist.all_reduce(tensor, group=self.process_group)
        self.fallbacks += 1
        self.last_reason = reason
        self.last_result = Result(path="fallback", scale_bits=None, lanes=tensor.numel())
        self._note("fallback", reason, kind)
        return tensor

    # -- logging and reports -----------------------------------------------------------------
    def _note(self, path, reason, kind):
        previous = self.last_path
        self.last_path = path
        if path == "fallback":
            if kind != self._logged_kind:
                self._logged_kind = kind
                log.warning("inac_torch: bucket %d of worker %s falls back on the process "
                            "group's all-reduce: %s", self.buckets - 1, self.worker, reason)
        elif previous == "fallback":
            self._logged_kind = None
            log.info("inac_torch: back on INAC (%s) at bucket %d after %d fallback buckets",
                     path, self.buckets - 1, self.fallbacks)
        self._maybe_report(path, reason, kind)

    def _maybe_report(self, path, reason, kind):
        if not self._usable():
            return
        now = time.monotonic()
        key = (path, kind)
        if self._report_key is not None and key == self._report_key and \
                now - self._report_time < self.report_every_s:
            return
        self._report_key = key
        self._report_time = now
        self._report(path, reason)

    def _report(self, path, reason):
        self._reported_counts = (self.buckets, self.fallbacks)
        try:
            self.session.report(path, _clean_reason(reason) if reason else None,
                                allreduces=self.buckets, fallbacks=self.fallbacks)
            self.reports += 1
        except InacError as e:
            self.report_failures += 1
            if not self._report_error_logged:
                self._report_error_logged = True
                log.warning("inac_torch: cannot report the data path to the controller (not "
                            "retried until the next report is due): %s", e)


def comm_hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(state, inac_torch.comm_hook), with
    `state` an inac_torch.HookState. Averages the bucket over the process group through INAC,
    or through the process group's all-reduce when some rank failed (every rank decides the
    same). Returns a completed torch.futures.Future of the bucket's tensor."""
    tensor = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    state.allreduce_bucket_(tensor)
    future = torch.futures.Future()
    future.set_result(tensor)
    return future
