"""The workload runner: a broker (its own, or ``--bootstrap``), worker subprocesses
(``worker.py``), a seeded nemesis, then a final read of everything and the checker.

Timeline of one run:

1. start the broker (``compat_tests.conftest.BrokerProcess``) with a short timed-out-
   transaction check and, under faults, a ``kafkad.fault.injection`` spec; create the topics;
2. start the workers: transactional producers of confluent-kafka and kafka-python over the
   data topics and the copiers' input, consume-transform-produce copiers in one group,
   read_committed readers;
3. until ``duration`` or ``max_txns``: the nemesis (seeded) kills the broker with SIGKILL and
   restarts it (a new fault seed each time: the crash points would fire at the same spot
   again otherwise), pauses it (SIGSTOP for 1-6 s), SIGKILLs a producer or a copier
   mid-transaction and starts a new instance
   with the same transactional.id (it fences the old one and aborts its transaction; if the
   new one is slow the transaction's short timeout does it), starts and stops readers (group
   joins and leaves). A watchdog SIGKILLs and replaces a worker silent for ``stall_s`` (a
   client stuck after a restart, librdkafka#5456), a worker that gave up (exit 3) is
   replaced the same way;
4. stop: workers are asked to finish (stdin closed), killed if they do not;
5. final: wait (bounded) for every LSO to reach its high watermark, record the end offsets, read
   every partition at read_committed and read_uncommitted from offset 0, record the copiers'
   committed offsets; check the history.

Everything random is drawn from ``seed``; what the broker has done when a kill lands depends on
timing, so a failing run prints its seed and keeps its history (JSON lines) for the checker.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from compat_tests.workload.checker import Report, check
from compat_tests.workload.profiles import DATA, FAULT_SPEC, IN, OUT, Profile

REPO = Path(__file__).resolve().parent.parent.parent


@dataclass
class Worker:
    name: str
    cfg: dict[str, Any]
    proc: subprocess.Popen[str]
    last_seen: float = field(default_factory=time.monotonic)
    done: bool = False
    reader: threading.Thread | None = None  # collects its stdout


def proc_usage(pid: int) -> tuple[int, int]:
    """(VmRSS in kB, number of open file descriptors) of a process, from /proc."""
    rss = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


class History:
    """Events from every worker and the runner, in arrival order, also written to a file."""

    def __init__(self, path: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115
        self.path = path

    def add(self, event: dict[str, Any]) -> None:
        event.setdefault("t", time.monotonic_ns())
        with self._lock:
            self.events.append(event)
            self._file.write(json.dumps(event) + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Run:
    def __init__(
        self,
        seed: int,
        profile: Profile,
        workdir: Path,
        bootstrap: str | None = None,
        log: IO[str] = sys.stderr,
        duration_s: float | None = None,
    ) -> None:
        self.seed, self.p, self.dir = seed, profile, workdir
        self.duration_s = profile.duration_s if duration_s is None else duration_s
        self.rng = random.Random(seed)
        self.log = log
        self.history = History(workdir / "history.jsonl")
        self.external = bootstrap
        self.broker: Any = None
        self.broker_lock = threading.RLock()
        self.workers: dict[str, Worker] = {}
        self.retired: list[Worker] = []  # replaced instances, reaped at the end
        self.later: dict[str, float] = {}  # killed workers replaced at a time
        self.samples: list[tuple[float, int, int, int]] = []  # (t, pid, rss kB, open fds)
        self.instances: Counter[str] = Counter()
        self.restarts = 0
        self.stats: Counter[str] = Counter()
        run = uuid.uuid4().hex[:6]
        self.topics = [(f"wl-{s}-{run}", n) for s, n in DATA]
        self.input = (f"wl-{IN[0]}-{run}", IN[1])
        self.output = (f"wl-{OUT[0]}-{run}", OUT[1])
        self.group = f"wl-copy-{run}"
        self.readers_group = f"wl-read-{run}"
        self.stopping = threading.Event()

    # ---- the broker -------------------------------------------------------------------

    def say(self, msg: str) -> None:
        print(f"[workload {time.strftime('%H:%M:%S')}] {msg}", file=self.log, flush=True)

    def broker_settings(self) -> dict[str, str]:
        s = {
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
            "group.initial.rebalance.delay.ms": "0",
            # KIP-848 copiers: heartbeats and session timeout as short as the classic ones'
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.min.session.timeout.ms": "6000",
        }
        if self.p.faults:
            s["kafkad.fault.injection"] = f"seed={self.seed * 1000 + self.restarts}; {FAULT_SPEC}"
        return s

    def start_broker(self) -> str:
        if self.external:
            return self.external
        from compat_tests.conftest import _LIVE, BrokerProcess

        data = self.dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.broker = BrokerProcess(data, self.dir / "kafkad.stderr.log", self.broker_settings())
        _LIVE.append(self.broker)
        self.broker.start()
        return str(self.broker.bootstrap)

    def stop_broker(self) -> None:
        """Undo ``start_broker``: stop the broker this run started, if any."""
        if self.broker is None:
            return
        from compat_tests.conftest import _LIVE

        self.broker.stop()
        if self.broker in _LIVE:
            _LIVE.remove(self.broker)

    def restart_broker(self, kill: bool) -> None:
        with self.broker_lock:
            self.restarts += 1
            if kill:
                self.broker.kill9()
            self.broker.settings.update(self.broker_settings())
            self.broker.restart()

    def watch_broker(self) -> None:
        while not self.stopping.wait(0.05):
            with self.broker_lock:
                if self.broker is not None and self.broker.exited():
                    self.stats["crash_points"] += 1
                    self.history.add({"type": "nemesis", "kind": "crash_point"})
                    self.say("broker crashed at a crash point: restarting")
                    self.restart_broker(kill=False)

    def sample_broker(self) -> None:
        """The broker's resident memory and open files, once a second."""
        while not self.stopping.wait(1.0):
            with self.broker_lock:
                pid = self.broker.pid if self.broker is not None and not self.broker.exited() else 0
            if pid:
                with contextlib.suppress(OSError, ValueError):
                    self.samples.append((time.monotonic(), pid, *proc_usage(pid)))

    # ---- workers ----------------------------------------------------------------------

    def spawn(self, name: str, cfg: dict[str, Any]) -> None:
        self.instances[name] += 1
        cfg = {**cfg, "worker": f"{name}.{self.instances[name]}"}
        cfg["seed"] = self.seed * 7919 + zlib.crc32(cfg["worker"].encode())
        with open(self.dir / f"{name}.stderr.log", "a") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "compat_tests.workload.worker", json.dumps(cfg)],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.retired += [self.workers[name]] if name in self.workers else []
        w = Worker(name, cfg, proc)
        self.workers[name] = w
        w.reader = threading.Thread(target=self.collect, args=(w,), daemon=True)
        w.reader.start()

    def collect(self, w: Worker) -> None:
        assert w.proc.stdout is not None
        with w.proc.stdout:
            self._collect(w, w.proc.stdout)

    def _collect(self, w: Worker, stdout: IO[str]) -> None:
        for line in stdout:
            w.last_seen = time.monotonic()
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut by SIGKILL
            if event["type"] == "hb":
                continue
            if event["type"] == "note":
                self.say(f"{w.cfg['worker']}: {event['what']}")
                continue
            if event["type"] == "end" and event["phase"] == "ok":
                self.stats["txns_committed" if event["commit"] else "txns_aborted"] += 1
            self.history.add(event)

    def base_cfg(self, bootstrap: str) -> dict[str, Any]:
        return {
            "bootstrap": bootstrap,
            "txn_timeout_ms": self.p.txn_timeout_ms,
            "abort_p": self.p.abort_p,
            "max_sends": self.p.max_sends,
            "max_txns": self.p.max_txns,
            "pause_s": self.p.pause_s,
            "topics": [*self.topics, self.input],
        }

    def start_workers(self, bootstrap: str) -> None:
        base = self.base_cfg(bootstrap)
        for i, client in enumerate(self.p.producers):
            name = f"p{i}-{client}"
            self.spawn(name, {**base, "role": "producer", "client": client, "tid": f"{name}-tid"})
        for i, client in enumerate(self.p.copiers):
            name = f"copier{i}-{client}"
            cfg = {**base, "role": "copier", "client": client, "tid": f"{name}-tid"}
            cfg.update(input=self.input[0], output=list(self.output), group=self.group)
            cfg["abort_p"] = self.p.copier_abort_p
            self.spawn(name, cfg)
        for i in range(self.p.readers):
            self.start_reader(bootstrap, i)

    def start_reader(self, bootstrap: str, i: int) -> None:
        cfg = {**self.base_cfg(bootstrap), "role": "reader", "client": "confluent"}
        cfg.update(group=self.readers_group, topics=[*self.topics, self.input, self.output])
        self.spawn(f"reader{i}", cfg)

    def kill_worker(self, name: str, why: str) -> None:
        w = self.workers[name]
        w.proc.kill()
        w.proc.wait(10)
        self.stats[why] += 1
        self.history.add({"type": "nemesis", "kind": why, "worker": w.cfg["worker"]})

    def replace(self, name: str) -> None:
        self.spawn(name, self.workers[name].cfg)

    def supervise(self) -> None:
        """Replace workers that gave up or fell silent, and killed ones whose time came."""
        for name, at in list(self.later.items()):
            if time.monotonic() >= at:
                del self.later[name]
                self.replace(name)
        for name, w in list(self.workers.items()):
            if w.done or name in self.later:
                continue
            code = w.proc.poll()
            if code is not None:
                if w.cfg["role"] == "producer" and code == 0:
                    w.done = True  # max_txns reached
                    continue
                self.stats["worker_gave_up"] += 1
                self.say(f"{w.cfg['worker']} exited {code}: replacing it")
                self.replace(name)
            elif time.monotonic() - w.last_seen > self.p.stall_s:
                self.say(f"{w.cfg['worker']} silent for {self.p.stall_s}s: replacing it")
                self.kill_worker(name, "stall_kill")
                self.replace(name)

    def nemesis_step(self, bootstrap: str) -> str:
        choices = ["client_kill", "reader_churn"]
        if self.p.faults and not self.external:
            choices += ["broker_kill", "broker_kill", "broker_pause"]
        what = self.rng.choice(choices)
        if what == "broker_kill":
            self.history.add({"type": "nemesis", "kind": "broker_kill"})
            self.stats["broker_kills"] += 1
            self.restart_broker(kill=True)
        elif what == "broker_pause":  # SIGSTOP: every client times out against a live socket
            pause = self.rng.uniform(1, 6)
            self.history.add({"type": "nemesis", "kind": "broker_pause"})
            self.stats["broker_pauses"] += 1
            with self.broker_lock:
                os.kill(self.broker.pid, signal.SIGSTOP)
                try:
                    time.sleep(pause)
                finally:
                    os.kill(self.broker.pid, signal.SIGCONT)
            what = f"broker_pause {pause:.1f}s"
        elif what == "client_kill":
            victims = sorted(n for n, w in self.workers.items() if w.cfg["role"] != "reader")
            name = self.rng.choice(victims)
            if self.workers[name].done:
                return f"{name} is done"
            self.kill_worker(name, "client_kill")
            if self.rng.random() < 0.5:
                self.replace(name)  # same transactional.id: fences the dead instance
                what = f"client_kill {name}, replaced"
            else:  # its open transaction must be aborted by the coordinator's timeout
                self.later[name] = time.monotonic() + 1.5 * self.p.txn_timeout_ms / 1000
                what = f"client_kill {name}, replaced after its transaction timeout"
        else:
            readers = sorted(n for n, w in self.workers.items() if w.cfg["role"] == "reader")
            live = [n for n in readers if self.workers[n].proc.poll() is None]
            if live and self.rng.random() < 0.5:
                name = self.rng.choice(live)
                w = self.workers[name]
                assert w.proc.stdin is not None
                with contextlib.suppress(BrokenPipeError):
                    w.proc.stdin.close()
                w.done = True
                self.stats["reader_leaves"] += 1
                what = f"reader leaves {name}"
            else:
                i = len(readers) if not readers else int(self.rng.random() * (len(readers) + 1))
                name = f"reader{i}"
                if name in self.workers and not self.workers[name].done:
                    return "reader stays"
                self.start_reader(bootstrap, i)
                self.stats["reader_joins"] += 1
                what = f"reader joins {name}"
        return what

    # ---- the run ----------------------------------------------------------------------

    def run(self) -> Report:
        t0 = time.monotonic()
        bootstrap = self.start_broker()
        self.say(f"seed={self.seed} broker={bootstrap} dir={self.dir}")
        self.create_topics(bootstrap)
        watcher = threading.Thread(target=self.watch_broker, daemon=True)
        if self.broker is not None:
            watcher.start()
            threading.Thread(target=self.sample_broker, daemon=True).start()
        end = t0 + self.duration_s
        next_nemesis = time.monotonic() + self.rng.uniform(*self.p.nemesis_every_s)
        try:
            self.start_workers(bootstrap)
            while time.monotonic() < end:
                time.sleep(0.2)
                self.supervise()
                if all(w.done for w in self.workers.values() if w.cfg["role"] == "producer"):
                    break
                if time.monotonic() >= next_nemesis:
                    self.say(f"nemesis: {self.nemesis_step(bootstrap)}")
                    next_nemesis = time.monotonic() + self.rng.uniform(*self.p.nemesis_every_s)
            self.stop_workers()
            self.stopping.set()
            if watcher.is_alive():
                watcher.join(5)
            self.final(bootstrap)
        finally:
            self.stopping.set()
            for w in [*self.retired, *self.workers.values()]:
                if w.proc.poll() is None:
                    w.proc.kill()
                w.proc.wait(10)
                if w.proc.stdin is not None and not w.proc.stdin.closed:
                    with contextlib.suppress(BrokenPipeError):
                        w.proc.stdin.close()
                if w.reader is not None:
                    w.reader.join(10)
            self.history.close()
        report = check(self.history.events)
        for k, v in self.stats.items():
            report.counts[f"run.{k}"] = v
        if self.broker is not None:
            report.counts["run.injected_faults"] = self.injected_faults()
        report.counts["run.seconds"] = int(time.monotonic() - t0)
        return report

    def injected_faults(self) -> int:
        try:
            text = (self.dir / "kafkad.stderr.log").read_text(errors="replace")
        except OSError:
            return 0
        return text.count("fault injection: ")

    def stop_workers(self) -> None:
        for w in self.workers.values():
            if w.proc.poll() is None and w.proc.stdin is not None and not w.proc.stdin.closed:
                with contextlib.suppress(BrokenPipeError):
                    w.proc.stdin.close()
        deadline = time.monotonic() + 15
        for w in self.workers.values():
            try:
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{w.cfg['worker']} did not stop: SIGKILL")
                self.kill_worker(w.name, "client_kill")

    def create_topics(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        want = [*self.topics, self.input, self.output]
        deadline = time.monotonic() + 60
        while True:
            futs = admin.create_topics([NewTopic(t, n, 1) for t, n in want])
            try:
                for f in futs.values():
                    f.result(15)
                return
            except Exception as exc:
                if "already exists" in str(exc).lower():
                    want = [(t, n) for t, n in want if not futs[t].done() or futs[t].exception()]
                    want = [(t, n) for t, n in want if "already" not in str(futs[t].exception())]
                    if not want:
                        return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def all_tps(self) -> list[tuple[str, int]]:
        return [(t, p) for t, n in [*self.topics, self.input, self.output] for p in range(n)]

    def final(self, bootstrap: str) -> None:
        from compat_tests.workload.final import (
            committed_offsets,
            read_partition,
            wait_end_offsets,
        )

        tps = self.all_tps()
        wait = self.p.txn_timeout_ms / 1000 + 30
        ends = wait_end_offsets(bootstrap, tps, wait)
        for (t, p), (lso, hw) in ends.items():
            self.history.add(
                {"type": "end_offsets", "topic": t, "partition": p, "lso": lso, "hw": hw}
            )
        for iso in ("read_committed", "read_uncommitted"):
            for t, p in tps:
                lso, hw = ends[(t, p)]
                end = lso if iso == "read_committed" else hw
                recs, complete = read_partition(bootstrap, t, p, iso, end, 60)
                self.history.add(
                    {
                        "type": "final_read",
                        "isolation": iso,
                        "topic": t,
                        "partition": p,
                        "records": recs,
                        "end": end,
                        "complete": complete,
                    }
                )
        offs = committed_offsets(bootstrap, self.group, self.input[0], self.input[1], 30)
        self.history.add({"type": "final_offsets", "group": self.group, "offsets": offs})
