"""nats-server restarted mid-stream under a steady writer (bench/relay/nats_restart.sh).

This driver owns nats-server: it starts it (JetStream, file store, monitoring port), makes the
stream, configures the nats sink with its defaults, and then, while one psycopg writer commits
--rate outbox.enqueue() per second and another session samples outbox.status every
--sample-ms, runs --rounds restarts: SIGTERM, wait for the process to exit, --outage-seconds
down, start it again on the same port and store.

Per restart:
  ready    the first moment /healthz on the monitoring port answers 200 (polled every 5 ms;
           nats-server's /healthz includes JetStream); also when the client port first
           accepted a TCP connection.
  resumed  the smallest published_at (the relay's mark, GetCurrentTimestamp() after the
           PubAcks: the same CLOCK_REALTIME as time.time() here) at or after `ready`. The old
           server is gone, so every such event was acknowledged by the new one.
  gap      resumed - ready.
After the writer stops and everything is published, the stream is read back with the nats
npm package (test/consumers/nats_stream.js read) and compared with the ids in outbox.events.
The pid of the running nats-server is kept in --pid-file (the shell's exit trap stops it).
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relaybench import Admin, connect, out, verdict  # noqa: E402

CONFIG_ERROR = "sink configuration error"


class Nats:
    """nats-server as a child process, restarted with the same arguments."""

    def __init__(self, args):
        self.args = args
        self.proc = None

    def start(self):
        log = open(self.args.nats_log, "ab")
        self.proc = subprocess.Popen(
            ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.args.port),
             "-m", str(self.args.monitor_port), "-sd", self.args.store],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        with open(self.args.pid_file, "w") as f:
            f.write("%d\n" % self.proc.pid)
        return time.time()

    def stop(self):
        """SIGTERM and wait for the exit; (time signalled, time it exited)."""
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        return t0, time.time()

    def wait_ready(self, timeout=60.0):
        """(time the client port accepted, time /healthz answered ok)."""
        t_port = t_health = None
        url = "http://127.0.0.1:%d/healthz" % self.args.monitor_port
        deadline = time.time() + timeout
        while time.time() < deadline and t_health is None:
            if t_port is None:
                try:
                    socket.create_connection(("127.0.0.1", self.args.port), timeout=0.2).close()
                    t_port = time.time()
                except OSError:
                    pass
            try:
                with urllib.request.urlopen(url, timeout=0.5) as r:
                    if r.status == 200 and json.loads(r.read() or b"{}").get("status") == "ok":
                        t_health = time.time()
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.005)
        if t_health is None:
            raise RuntimeError("nats-server not healthy within %.0f s" % timeout)
        return t_port or t_health, t_health


class Writer(threading.Thread):
    """One session, one outbox.enqueue() per transaction at `rate` per second over `keys`
    keys, evenly spaced, until stopped."""

    def __init__(self, rate, keys):
        super().__init__(daemon=True)
        self.rate, self.keys = rate, keys
        self.ids = []
        self.max_gap = 0.0  # the longest time between two commits (the writer never waits on NATS)
        self.error = None
        self.stop_at = None

    def run(self):
        try:
            c = connect(autocommit=False)
            cur = c.cursor()
            payload = json.dumps({"order_id": 0, "customer_id": 42, "total": "557.99",
                                  "currency": "EUR", "items": [{"sku": "SKU-70801", "qty": 9}]})
            start = last = time.time()
            k = 0
            while self.stop_at is None:
                target = start + k / self.rate
                now = time.time()
                if target > now:
                    time.sleep(target - now)
                cur.execute("SELECT outbox.enqueue('order', %s, 'OrderPlaced', %s::jsonb)::text",
                            ("k%d" % (k % self.keys), payload))
                self.ids.append(cur.fetchone()[0])
                c.commit()
                now = time.time()
                self.max_gap = max(self.max_gap, now - last)
                last = now
                k += 1
            self.elapsed = time.time() - start
            c.close()
        except Exception as e:  # reported by the main thread
            self.error = e


class Sampler(threading.Thread):
    """outbox.status every `every` seconds: (time, state, last_error, events_sent)."""

    def __init__(self, every):
        super().__init__(daemon=True)
        self.every = every
        self.samples = []
        self.done = False

    def run(self):
        c = connect()
        while not self.done:
            t = time.time()
            row = c.execute("SELECT state, coalesce(last_error, ''), events_sent FROM outbox.status"
                            " ORDER BY worker LIMIT 1").fetchone()
            self.samples.append((t,) + tuple(row))
            time.sleep(max(0.0, self.every - (time.time() - t)))
        c.close()


def first_published_after(a, t, timeout):
    """The smallest published_at >= t (epoch seconds), waiting up to `timeout` for one."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = a.q1("SELECT extract(epoch FROM min(published_at))::float8 FROM outbox.events"
                 " WHERE published_at >= to_timestamp(%s)", (t,))
        if v is not None:
            return v
        time.sleep(0.05)
    return None


def wait_caught_up(a, t, timeout):
    """Seconds until every event created before t is published (None: timeout)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if a.q1("SELECT count(*) FROM outbox.events WHERE published_at IS NULL"
                " AND created_at < to_timestamp(%s)", (t,)) == 0:
            return time.time()
        time.sleep(0.05)
    return None


def read_stream(args):
    r = subprocess.run(["node", args.stream_js, "read", args.url, "OUTBOX"],
                       capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def check_stream(a, args):
    """Every id of outbox.events in the stream; per key, first occurrences in seq order."""
    events = {i: (k, s) for i, k, s in a.c.execute(
        "SELECT id::text, aggregateid, seq FROM outbox.events").fetchall()}
    messages = read_stream(args)
    seen = set()
    last = {}
    inversions = []
    unknown = 0
    for m in messages:
        eid = (m["headers"].get("Nats-Msg-Id") or [""])[0]
        if eid not in events:
            unknown += 1
            continue
        if eid in seen:
            continue
        seen.add(eid)
        key, seq = events[eid]
        if key in last and seq < last[key][1]:
            inversions.append((key, last[key][0], eid))
        last[key] = (eid, seq)
    missing = sorted(set(events) - seen)
    return len(events), len(messages), missing, inversions, len({k for k, _, _ in inversions}), unknown


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--monitor-port", type=int, required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--nats-log", required=True)
    p.add_argument("--pid-file", required=True)
    p.add_argument("--stream-js", required=True)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--outage-seconds", type=float, default=5)
    p.add_argument("--steady-seconds", type=float, default=5)
    p.add_argument("--sample-ms", type=float, default=100)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    args.url = "nats://127.0.0.1:%d" % args.port

    nats = Nats(args)
    nats.start()
    nats.wait_ready()
    subprocess.run(["node", args.stream_js, "add", args.url, "OUTBOX", "outbox.event.>"], check=True)
    out("   %s %s, monitoring :%d, store %s; stream OUTBOX on outbox.event.>" % (
        subprocess.run(["nats-server", "--version"], capture_output=True, text=True).stdout.strip(),
        args.url, args.monitor_port, args.store))

    a = Admin()
    a.configure("nats", {"servers": args.url})
    a.wait_state(("idle", "sending"))
    out("   sink: %s" % a.q1("SELECT sink FROM outbox.status LIMIT 1"))
    sampler = Sampler(args.sample_ms / 1000.0)
    sampler.start()
    writer = Writer(args.rate, args.keys)
    writer.start()
    out("   writer: %.0f commits/s over %d keys; %d restarts, %.0f s down each, %.0f s steady between"
        % (args.rate, args.keys, args.rounds, args.outage_seconds, args.steady_seconds))
    time.sleep(args.steady_seconds)
    if not first_published_after(a, time.time() - args.steady_seconds, 10):
        raise RuntimeError("nothing published before the first restart: %r" % (a.worker(),))

    rounds = []
    for r in range(1, args.rounds + 1):
        t_term, t_exit = nats.stop()
        time.sleep(args.outage_seconds)
        t_spawn = nats.start()
        t_port, t_ready = nats.wait_ready()
        resumed = first_published_after(a, t_ready, args.timeout)
        resumed_port = first_published_after(a, t_port, 0.1)
        caught = wait_caught_up(a, t_ready, args.timeout)
        last_before = a.q1("SELECT extract(epoch FROM max(published_at))::float8 FROM outbox.events"
                           " WHERE published_at < to_timestamp(%s)", (t_exit,))
        # Events enqueued before SIGTERM and published only after ready: the batch that was
        # in flight when the server stopped (if any).
        stuck = a.c.execute(
            "SELECT count(*), extract(epoch FROM min(created_at))::float8,"
            " extract(epoch FROM max(created_at))::float8 FROM outbox.events"
            " WHERE created_at < to_timestamp(%s) AND published_at >= to_timestamp(%s)",
            (t_term, t_ready)).fetchone()
        row = dict(round=r, exit=t_exit - t_term, spawn_port=t_port - t_spawn,
                   port_ready=t_ready - t_port, last_before=(t_term - last_before) if last_before else None,
                   gap=(resumed - t_ready) if resumed else None,
                   gap_port=(resumed_port - t_port) if resumed_port else None,
                   caught=(caught - t_ready) if caught else None, t_term=t_term, t_ready=t_ready,
                   stuck=stuck[0])
        rounds.append(row)
        out("   round %d: SIGTERM -> exit %.2f s; start -> port %.2f s, port -> /healthz ok %.3f s;"
            " /healthz ok -> first event published %s; port open -> first published %s;"
            " backlog from before ready published %s" % (
                r, row["exit"], row["spawn_port"], row["port_ready"],
                "%.3f s" % row["gap"] if row["gap"] is not None else "NONE",
                "%.3f s" % row["gap_port"] if row["gap_port"] is not None else "-",
                "%.2f s after ready" % row["caught"] if row["caught"] is not None else "NOT"))
        if stuck[0]:
            out("      %d events enqueued before SIGTERM (%.3f..%.3f s before it) were published only"
                " after ready" % (stuck[0], t_term - stuck[1], t_term - stuck[2]))
        time.sleep(args.steady_seconds)

    writer.stop_at = time.time()
    writer.join()
    if writer.error:
        raise writer.error
    drained = a.wait_drained(args.timeout)
    sampler.done = True
    sampler.join()
    status = a.worker()
    attempts = a.q1("SELECT coalesce(sum(attempts), 0) FROM outbox.events")
    out("   writer: %d commits, %.1f/s (longest time between two commits %.0f ms); all published: %s;"
        " attempts used %d; status at the end: %s, events_sent %d" % (
            len(writer.ids), len(writer.ids) / writer.elapsed, 1000 * writer.max_gap, drained, attempts,
            status["state"], status["events_sent"]))

    # What outbox.status said, per round, from SIGTERM to caught up: each distinct
    # (state, last_error) in order of first sight.
    config_samples = [s for s in sampler.samples if s[2].startswith(CONFIG_ERROR)]
    for row in rounds:
        end = row["t_ready"] + (row["caught"] or args.timeout) + 0.5
        seen = []
        for t, state, err, _ in sampler.samples:
            if row["t_term"] <= t <= end and (state, err) not in [x[1:] for x in seen]:
                seen.append((t - row["t_term"], state, err))
        out("   round %d outbox.status (s after SIGTERM: state | last_error):" % row["round"])
        for dt, state, err in seen:
            out("      %+7.2f  %-8s | %s" % (dt, state, err[:160]))

    total, stored, missing, inversions, bad_keys, unknown = check_stream(a, args)
    out("   stream check (nats npm package): %d events in outbox.events, %d messages in OUTBOX"
        " (%d duplicates kept), %d ids missing, %d keys' first occurrences out of seq order,"
        " %d messages of no known id" % (total, stored, stored - (total - len(missing)) - unknown,
                                         len(missing), bad_keys, unknown))
    for eid in missing[:20]:
        out("      missing: %s" % eid)
    for key, before, eid in inversions[:20]:
        out("      out of order: key %s: %s stored before %s" % (key, before, eid))

    gaps = [row["gap"] for row in rounds]
    ok_gaps = [g for g in gaps if g is not None]
    med = statistics.median(ok_gaps) if ok_gaps else float("nan")
    mx = max(ok_gaps) if len(ok_gaps) == len(gaps) and ok_gaps else float("inf")
    out("")
    out("   | round | SIGTERM -> exit s | start -> port s | port -> /healthz ok s | /healthz ok -> "
        "first published s | backlog published s after ready | enqueued before SIGTERM, "
        "published after ready |")
    out("   | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rounds:
        out("   | %d | %.2f | %.3f | %.3f | %s | %s | %d |" % (
            row["round"], row["exit"], row["spawn_port"], row["port_ready"],
            "%.3f" % row["gap"] if row["gap"] is not None else "none",
            "%.2f" % row["caught"] if row["caught"] is not None else "not", row["stuck"]))
    out("   gap (/healthz ok -> first event published): median %.3f s, max %.3f s over %d restarts"
        % (med, mx, len(gaps)))
    out("   outbox.status: %d samples every %.0f ms, %d with a configuration error" % (
        len(sampler.samples), args.sample_ms, len(config_samples)))
    for t, state, err, _ in config_samples[:3]:
        out("      %s %s | %s" % (time.strftime("%H:%M:%S", time.localtime(t)), state, err[:200]))
    out("")
    verdict("delivery resumes within 2 s of the server being ready, every restart (max %.3f s)" % mx,
            mx <= 2.0)
    verdict("outbox.status never shows a configuration error (%d of %d samples)" % (
        len(config_samples), len(sampler.samples)), not config_samples)
    verdict("every event id in the stream, per key in seq order (%d missing, %d keys out of order)"
            % (len(missing), bad_keys), drained and not missing and not inversions)


if __name__ == "__main__":
    main()
