"""The replay benchmark's Python side (bench/relay/replay.sh calls it as
`replay_bench.py FUNCTION JSON_ARGS`): relaybench.py's connection and relay helpers, plus the
replay's own timing, CPU and latency readings."""
import json, os, sys, time
sys.path.insert(0, os.environ["RELAY_BENCH_DIR"])
from relaybench import Admin, relay_rows, wait_unconfigured, machine_ticks, busy_pct, PAYLOAD_SQL, connect


def sched_ns(pids):
    """CPU time (ns) of these processes, all threads (/proc/PID/task/*/schedstat); a process
    gone counts 0."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


class ReplayCpu:
    """The replay worker's CPU: its pid(s) from pg_stat_activity, each sampled while it
    lives (the worker exits when no replay is left; the last sample of each pid counts)."""

    def __init__(self):
        self.last = {}

    def sample(self, a):
        pids = [r[0] for r in a.c.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox replay'").fetchall()]
        for p in pids:
            ns = sched_ns([p])
            if ns:
                self.last[p] = max(self.last.get(p, 0), ns)
        return pids

    def seconds(self):
        return sum(self.last.values()) / 1e9


def relay_pids(a):
    return [r[0] for r in relay_rows(a) if r[0]]


def fill(args):
    a = Admin()
    a.ex("SELECT outbox.unconfigure_sink()")
    wait_unconfigured(a)
    a.ex("TRUNCATE outbox.events")
    t0 = time.time()
    a.ex("SELECT count(outbox.enqueue('order', (g %% %d + 1)::text, 'OrderPlaced', %s)) "
         "FROM generate_series(1, %d) g" % (args["keys"], PAYLOAD_SQL, args["rows"]))
    t1 = time.time()
    a.ex("VACUUM (ANALYZE) outbox.events")
    a.ex("CHECKPOINT")
    print("   fill: %d events in %.1f s, VACUUM (ANALYZE) + CHECKPOINT %.1f s; outbox.events %s" % (
        args["rows"], t1 - t0, time.time() - t1,
        a.q1("SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_inherits i "
             "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'outbox.events'::regclass")))


def drain(args):
    """As sinks.sh's drain: configure_sink('null'), timed from its commit until the relay's
    counters count the backlog sent."""
    a = Admin()
    n = args["rows"]
    w0 = wait_unconfigured(a)
    pids = [r[0] for r in w0]
    sent0 = sum(r[3] for r in w0)
    cpu0, m0 = sched_ns(pids), machine_ticks()
    a.configure("null", {})
    t0 = time.time()  # the configuring transaction has committed (autocommit)
    t1 = None
    while time.time() < t0 + args["timeout"]:
        time.sleep(0.005)
        if sum(r[3] for r in relay_rows(a)) - sent0 >= n:
            t1 = time.time()
            break
    cpu1, m1 = sched_ns(pids), machine_ticks()
    w1 = relay_rows(a)
    left = a.unpublished()
    failed = sum(r[4] for r in w1) - sum(r[4] for r in w0)
    batches = sum(r[2] for r in w1) - sum(r[2] for r in w0)
    if t1 is None:
        print("   drain: TIMEOUT after %d s: %d of %d unpublished" % (args["timeout"], left, n))
        res = {"ok": False}
    else:
        secs = t1 - t0
        res = {"ok": True, "rate": n / secs, "secs": secs, "relay_cpu": (cpu1 - cpu0) / 1e9,
               "busy": busy_pct(m0, m1), "batches": batches}
        print("   drain:  %d events in %6.2f s = %8.0f events/s, %d batches, relay CPU %.2f s (%.0f %% of a core),"
              " machine busy %.0f %%" % (n, secs, res["rate"], batches, res["relay_cpu"],
                                           100 * res["relay_cpu"] / secs, res["busy"]))
    if failed or left:
        print("   WARNING: drain: %d failed, %d left unpublished" % (failed, left))
        res["ok"] = False
    json.dump(res, open(args["out"], "w"))


def request_replay(a):
    """outbox.replay('-infinity', now()), autocommit: (id, seconds the call took, its commit
    time)."""
    t = time.time()
    rid = a.q1("SELECT outbox.replay('-infinity', now())")
    c = time.time()
    return rid, c - t, c


def replay(args):
    """One replay, alone: from the commit of outbox.replay() until its row says done."""
    a = Admin()
    pids = relay_pids(a)
    rc = ReplayCpu()
    relay0, m0 = sched_ns(pids), machine_ticks()
    relay_sent0 = sum(r[3] for r in relay_rows(a))
    rid, call_s, t0 = request_replay(a)
    t1 = None
    seen_pid = None
    while time.time() < t0 + args["timeout"]:
        time.sleep(0.005)
        p = rc.sample(a)
        if p and seen_pid is None:
            seen_pid = (p[0], time.time() - t0)
        if a.q1("SELECT state FROM outbox.replays WHERE id = %s", (rid,)) != "running":
            t1 = time.time()
            break
    relay1, m1 = sched_ns(pids), machine_ticks()
    relay_sent1 = sum(r[3] for r in relay_rows(a))
    row = a.c.execute(
        "SELECT state, events_total, events_sent, events_skipped, last_error, "
        "       extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8, "
        "       extract(epoch FROM requested_at)::float8 "
        "  FROM outbox.replays WHERE id = %s", (rid,)).fetchone()
    state, total, sent, skipped, err, started, finished, requested = row
    # Is the worker gone once the replay is done (it should exit when none is left)?
    gone = None
    for _ in range(100):
        if not a.c.execute("SELECT 1 FROM pg_stat_activity WHERE backend_type = 'outbox replay'").fetchall():
            gone = True
            break
        time.sleep(0.05)
    res = {"ok": t1 is not None and state == "done", "id": rid, "state": state, "total": total,
           "sent": sent, "skipped": skipped, "call_s": call_s}
    if t1 is None:
        print("   replay %d: TIMEOUT after %d s: state %s, %s of %s sent" % (rid, args["timeout"], state, sent, total))
    else:
        secs = t1 - t0
        wsecs = (finished - started) if started and finished else float("nan")
        res.update({"rate": sent / secs, "secs": secs, "rate_rows": sent / wsecs if wsecs > 0 else float("nan"),
                    "secs_rows": wsecs, "first_s": (started - t0) if started else float("nan"),
                    "replay_cpu": rc.seconds(), "relay_cpu": (relay1 - relay0) / 1e9,
                    "busy": busy_pct(m0, m1)})
        print("   replay %d: %s, %d of %d events sent (%d skipped) in %6.2f s = %8.0f events/s from the commit;"
              " started_at..finished_at %.2f s = %.0f events/s; replay() call %.2f s; first batch %.0f ms after the"
              " commit; worker pid %s seen after %s ms; replay worker CPU %.2f s (%.0f %% of a core), relay CPU"
              " %.2f s; machine busy %.0f %%" % (
                  rid, state, sent, total, skipped, secs, res["rate"], wsecs, res["rate_rows"], call_s,
                  1000 * res["first_s"], seen_pid[0] if seen_pid else "-",
                  "%.0f" % (1000 * seen_pid[1]) if seen_pid else "-", res["replay_cpu"],
                  100 * res["replay_cpu"] / secs, res["relay_cpu"], res["busy"]))
    if err:
        print("   WARNING: replay %d: last_error %s" % (rid, err))
    if sent != total or skipped:
        print("   WARNING: replay %d sent %s of events_total %s (%s skipped)" % (rid, sent, total, skipped))
        res["ok"] = False
    if args.get("expect") is not None and total != args["expect"]:
        print("   WARNING: replay %d: events_total %s, expected %s" % (rid, total, args["expect"]))
        res["ok"] = False
    if relay_sent1 != relay_sent0:
        print("   NOTE: the relay's counters moved by %d events during the replay" % (relay_sent1 - relay_sent0))
    if not gone:
        print("   WARNING: the replay worker is still there 5 s after its replay was done")
    json.dump(res, open(args["out"], "w"))


def keeper(args):
    """A replay running the whole time the writers run: requests one (and, with ahead = 1,
    the next at once, which waits in outbox.replays behind it: the worker takes the running
    replays in id order), says ready, then tops the queue up as soon as one is done; once
    the stop file appears (it holds the writers' window, epoch microseconds), cancels those
    still running and reports."""
    a = Admin()
    rc = ReplayCpu()
    ids, calls = [], {}
    k0 = time.time()
    want = 1 + args["ahead"]

    def request():
        rid, call_s, c = request_replay(a)
        ids.append(rid)
        calls[rid] = (call_s, c)

    request()
    open(args["ready"], "w").close()
    while len(ids) < want and not os.path.exists(args["stop"]):
        request()
    while not os.path.exists(args["stop"]):
        time.sleep(0.005)
        rc.sample(a)
        running = a.q1("SELECT count(*) FROM outbox.replays WHERE id = ANY (%s) AND state = 'running'", (ids,))
        if running < want and not os.path.exists(args["stop"]):
            request()
    cancelled = a.q1("SELECT count(*) FILTER (WHERE outbox.cancel_replay(id)) FROM outbox.replays WHERE state = 'running'")
    # Until the worker notices (after its current batch) and exits.
    for _ in range(400):
        rc.sample(a)
        if not a.c.execute("SELECT 1 FROM pg_stat_activity WHERE backend_type = 'outbox replay'").fetchall():
            break
        time.sleep(0.025)
    k1 = time.time()
    w0, w1 = [int(x) / 1e6 for x in open(args["stop"]).read().split()]
    rows = a.c.execute(
        "SELECT id, state, events_total, events_sent, extract(epoch FROM started_at)::float8, "
        "       extract(epoch FROM finished_at)::float8, last_error, upto_seq, requested_at, until "
        "  FROM outbox.replays WHERE id = ANY (%s) ORDER BY id", (ids,)).fetchall()
    # The worker takes the running replays one after the other, in id order: replay i is sent
    # from max(its commit, the end of replay i-1) to its finished_at. (The row's started_at is
    # its first progress save, which comes up to a second after its first batch when the
    # worker has just saved another replay's.)
    covered = 0.0
    sent = 0
    busy_s = 0.0
    gaps = []
    prev_end = None
    diff = []
    for rid, state, total, s, st, fin, err, upto, req_at, until in rows:
        sent += s
        if fin is not None:
            begin = calls[rid][1] if prev_end is None else max(calls[rid][1], prev_end)
            if prev_end is not None:
                gaps.append(begin - prev_end)
            covered += max(0.0, min(fin, w1) - max(begin, w0))
            busy_s += fin - begin
            prev_end = fin
        if err:
            print("      WARNING: replay %d: last_error %s" % (rid, err))
        if state == "done" and s != total:
            # Events of its window (seq <= upto_seq, created before until) published only after
            # the replay() call: the live writers' newest.
            late = a.q1("SELECT count(*) FROM outbox.event_status WHERE seq > %s - 5000 AND seq <= %s "
                        "AND created_at < %s AND published_at >= %s", (upto, upto, until, req_at))
            diff.append((rid, s - total, late))
    first_ms = 1000 * (rows[0][4] - calls[rows[0][0]][1]) if rows and rows[0][4] is not None else float("nan")
    res = {"replays": len(rows), "done": sum(1 for r in rows if r[1] == "done"), "cancelled": cancelled,
           "coverage": covered / (w1 - w0), "sent": sent, "rate": sent / busy_s if busy_s > 0 else float("nan"),
           "replay_cpu": rc.seconds(), "replay_cpu_pct": 100 * rc.seconds() / (k1 - k0), "call_s": max(c[0] for c in calls.values()),
           "gap_ms": 1000 * max(gaps) if gaps else 0.0, "diff": len(diff)}
    print("      replays %s: %d done, %d cancelled at the end; %d events sent at %.0f events/s;"
          " coverage of the writers' %.1f s: %.1f %%; replay() calls up to %.2f s; the first one's first progress"
          " save %.0f ms after its commit; largest gap between two replays %.0f ms; replay worker CPU %.2f s" % (
              ",".join(str(r[0]) for r in rows), res["done"], cancelled, sent, res["rate"], w1 - w0,
              100 * res["coverage"], res["call_s"], first_ms, res["gap_ms"], res["replay_cpu"]))
    if diff:
        print("      NOTE: %d of %d done replays sent another count than their events_total (%s: sent - total /"
              " events of the window published after the replay() call)" % (
                  len(diff), res["done"], ", ".join("#%d %+d/%d" % d for d in diff)))
    json.dump(res, open(args["out"], "w"))


def waits(args):
    """For --seconds: the relay's wait event every 20 ms (pg_stat_activity), and the server's
    WAL syncs (pg_stat_wal). Writes the share of samples in which the relay waited for the
    WAL (IO/WALSync, IO/WALWrite, LWLock/WALWrite) and the syncs per second."""
    c = connect()
    end = time.time() + args["seconds"]
    w0, b0 = c.execute("SELECT wal_sync, wal_bytes FROM pg_stat_wal").fetchone()
    t0 = time.time()
    n = wal = 0
    while time.time() < end:
        row = c.execute("SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = %s",
                        (args["pid"],)).fetchone()
        if row is not None:
            n += 1
            wal += row[0] in ("IO/WALSync", "IO/WALWrite", "LWLock/WALWrite")
        time.sleep(0.02)
    w1, b1 = c.execute("SELECT wal_sync, wal_bytes FROM pg_stat_wal").fetchone()
    secs = time.time() - t0
    json.dump({"wal_wait_pct": 100.0 * wal / max(1, n), "syncs": (w1 - w0) / secs,
               "wal_kb": float(b1 - b0) / 1024 / secs},
              open(args["out"], "w"))


if __name__ == "__main__":
    globals()[sys.argv[1]](json.loads(sys.argv[2]))
