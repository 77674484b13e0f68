"""Test harness of the inac_torch tests: a loopback job (no switch, one PS), `inac ps --serve`
as a subprocess, a fake controller, and ranks as spawned processes.

Environment: INAC_BIN (the inac binary), INAC_CLIENT_LIB (libinac_client.so; read by
inac_torch), PYTHONPATH with <repo>/python. tests/python/CMakeLists.txt sets all three.
"""

import dataclasses
import datetime
import http.server
import json
import multiprocessing
import os
import queue as queue_module
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
for path in (os.path.join(REPO, "python"), os.path.join(REPO, "examples", "pytorch")):
    if path not in sys.path:
        sys.path.insert(0, path)

JOB = 7
PS_ID = "ps0"


def inac_bin():
    return os.environ.get("INAC_BIN") or os.path.join(REPO, "build", "cli", "inac")


def loopback(net, host):
    """127.<net>.0.<host>: each test class its own addresses, so parallel ctest runs of the
    python tests never share an address:port."""
    return f"127.{net}.0.{host}"


def job_config(members, ps_address, job=JOB, tag=1, plan_version=1):
    """The JSON of GET /api/v1/jobs/{job}/config for one tag carried straight to one PS:
    members [(worker, address)], each aggregated at the PS itself (no switch)."""
    return {
        "job_id": job,
        "state": "running",
        "plan_version": plan_version,
        "batch_size": 64,
        "tags": [{
            "tag": tag,
            "ps": PS_ID,
            "ps_address": ps_address,
            "share": 1,
            "range": [0, 1],
            "members": [{"worker": w, "address": a, "aggregation_node": PS_ID}
                        for w, a in members],
            "aggregators": [],
        }],
    }


def free_udp_port(addresses, attempts=50):
    """A UDP port free on every address (the kernel picks it on the first one)."""
    for _ in range(attempts):
        socks = []
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(s)
            s.bind((addresses[0], 0))
            port = s.getsockname()[1]
            for a in addresses[1:]:
                t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(t)
                t.bind((a, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no UDP port free on all of {addresses}")


def udp_bound(address, port):
    """Whether some socket is bound to address:port (/proc/net/udp), without touching it."""
    a = socket.inet_aton(address)
    want = f"{a[::-1].hex().upper()}:{port:04X}"
    try:
        with open("/proc/net/udp") as f:
            return any(line.split()[1] == want for line in f.readlines()[1:])
    except OSError:
        return None  # unknown: the caller waits a little instead


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """What a rank needs of a LoopbackJob (picklable: passed to spawned ranks)."""

    job: int
    config_file: str
    port: int
    ps_address: str
    members: tuple

    def worker(self, rank):
        return self.members[rank][0]

    def address(self, rank):
        return self.members[rank][1]


class LoopbackJob:
    """A job of `workers` members h0.. at 127.<net>.0.11.., its PS at 127.<net>.0.10, the
    configuration in a temporary file, and `inac ps --serve` serving it. Use as a context
    manager; stop() (also on failure) terminates the PS and prints its log when asked."""

    def __init__(self, net, workers=4, job=JOB):
        self.job = job
        self.ps_address = loopback(net, 10)
        self.members = [(f"h{i}", loopback(net, 11 + i)) for i in range(workers)]
        self.port = free_udp_port([self.ps_address] + [a for _, a in self.members])
        self.dir = tempfile.TemporaryDirectory(prefix="inac_torch_test_")
        self.config = job_config(self.members, self.ps_address, job)
        self.config_file = os.path.join(self.dir.name, "job.json")
        with open(self.config_file, "w") as f:
            json.dump(self.config, f, indent=1)
        self.log_file = os.path.join(self.dir.name, "ps.log")
        self.proc = None

    def worker(self, rank):
        return self.members[rank][0]

    def address(self, rank):
        return self.members[rank][1]

    def spec(self):
        return JobSpec(self.job, self.config_file, self.port, self.ps_address,
                       tuple(self.members))

    def start(self):
        env = {k: v for k, v in os.environ.items() if k not in ("INAC_SERVER", "INAC_TOKEN")}
        cmd = [inac_bin(), "ps", "--job", str(self.job), "--ps", PS_ID, "--serve",
               "--config-file", self.config_file, "--bind", self.ps_address,
               "--port", str(self.port), "--unicast-results", "--no-progress"]
        self.log = open(self.log_file, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"inac ps exited with {self.proc.returncode}:\n"
                                   f"{' '.join(cmd)}\n{self.ps_log()}")
            bound = udp_bound(self.ps_address, self.port)
            if bound is None:
                time.sleep(0.3)
                break
            if bound:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"inac ps did not bind {self.ps_address}:{self.port} in 10 s:\n"
                               f"{self.ps_log()}")
        return self

    def ps_log(self):
        try:
            with open(self.log_file) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.log.close()
        self.proc = None

    def cleanup(self):
        self.stop()
        self.dir.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()
        return False


class FakeController:
    """Just enough of the controller's REST API for a session: GET
    /api/v1/jobs/{job}/config answers `config`, POST /api/v1/jobs/{job}/data-path is recorded
    in `reports` (the JSON bodies, with the path). Anything else: 404."""

    def __init__(self, config):
        self.config = config
        self.reports = []
        self.requests = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                with outer.lock:
                    outer.requests.append(("GET", self.path))
                if self.path.split("?")[0] == f"/api/v1/jobs/{outer.config['job_id']}/config":
                    self._answer(200, outer.config)
                else:
                    self._answer(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with outer.lock:
                    outer.requests.append(("POST", self.path))
                if self.path == f"/api/v1/jobs/{outer.config['job_id']}/data-path":
                    try:
                        body = json.loads(raw or b"{}")
                    except ValueError:
                        self._answer(400, {"error": "not JSON"})
                        return
                    with outer.lock:
                        outer.reports.append(body)
                    self._answer(200, {"state": body.get("path"), "summary": "",
                                       "allreduces": 0, "fallbacks": 0, "workers": []})
                else:
                    self._answer(404, {"error": "not found"})

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        return False


# -- ranks ----------------------------------------------------------------------------------------
def _rank_main(target, rank, world, args, master_port, results):
    try:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch

        torch.set_num_threads(1)
        if master_port:
            import torch.distributed as dist

            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{master_port}",
                                    rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=120))
        value = target(rank, world, *args)
        results.put((rank, "ok", value))
        if master_port:
            dist.destroy_process_group()
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(target, world, args=(), timeout_s=60, process_group=False):
    """Runs target(rank, world, *args) in `world` spawned processes (a Gloo process group over
    loopback when process_group) and returns the values by rank. A rank's exception fails the
    call with its traceback; ranks still running after timeout_s are killed (a hang fails the
    test, it does not block it)."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_tcp_port() if process_group else 0
    procs = [ctx.Process(target=_rank_main, args=(target, r, world, args, port, results),
                         daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    values, errors = {}, {}
    try:
        while len(values) < world and not errors:
            try:
                rank, status, value = results.get(timeout=0.5)
            except queue_module.Empty:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"ranks {sorted(set(range(world)) - set(values))} still running after "
                        f"{timeout_s} s (hang?)")
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead:
                    raise AssertionError(f"ranks {dead} died: exit codes "
                                         f"{[procs[r].exitcode for r in dead]}")
                continue
            (values if status == "ok" else errors)[rank] = value
    finally:
        for p in procs:
            p.join(timeout=10 if not errors else 1)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        rank = min(errors)
        raise AssertionError(f"rank {rank} failed:\n{errors[rank]}")
    return [values[r] for r in range(world)]
