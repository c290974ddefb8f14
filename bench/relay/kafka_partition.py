"""One Kafka partition without a leader for a while, mid-drain (bench/relay/kafka_partition.sh).

Three drains of the same backlog, one topic each (4 partitions on a 3-broker mock): a
baseline, the same with partition --partition's leader gone (-1) for --leaderless-seconds
from the moment --down-at of the backlog has been sent, and the baseline again (an A/A
control). Each drain: --rows events over --keys keys enqueued while no sink is configured,
then configure_sink('kafka', {"bootstrap.servers"}) (every option at its default).

Rates come from published_at (the relay's clock at marking, the clock time.time() reads):
the events of the keys on the other partitions ("healthy keys"), from the mark (the moment
the leader went, or the same point of a baseline drain) to the last of them published (at
most until the leader returned). Then an independent consumer (kcat) reads each topic: every
enqueued id must be there (sets of ids), and per key the first occurrences in seq order.
"""
import argparse
import collections
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relaybench import Admin, out, mock_command, verdict, wait_unconfigured, PAYLOAD_SQL  # noqa: E402


def enqueue_backlog(a, aggtype, rows, keys):
    """rows events of aggtype over keys k0..k{keys-1}; returns id -> (key, seq)."""
    a.ex("TRUNCATE outbox.events")
    a.ex("SELECT count(outbox.enqueue('%s', 'k' || (g %% %d), 'OrderPlaced', %s)) "
         "FROM generate_series(1, %d) g" % (aggtype, keys, PAYLOAD_SQL, rows))
    a.ex("ANALYZE outbox.events")
    a.ex("CHECKPOINT")
    return {str(i): (k, s) for i, k, s in a.c.execute(
        "SELECT id, aggregateid, seq FROM outbox.events").fetchall()}


class Tail:
    """kcat reading a topic from the beginning while the relay writes it: librdkafka's mock
    keeps only the last 5 MB (or 100,000 messages) of each partition, so a backlog of this
    size cannot be read back afterwards. Lines: partition, key, headers."""

    def __init__(self, args, topic):
        self.path = os.path.join(args.work, topic + ".kcat")
        self.err = self.path + ".err"
        with open(self.path, "w") as o, open(self.err, "w") as e:
            # Niced up and with short fetch waits, so that it keeps up on a busy machine; if
            # it falls behind anyway, librdkafka logs an offset reset (the check is then void).
            self.p = subprocess.Popen(["nice", "-n", "-10", "kcat", "-b", args.bootstrap, "-C",
                                       "-t", topic, "-o", "beginning", "-u",
                                       "-X", "fetch.wait.max.ms=5", "-X", "fetch.error.backoff.ms=5",
                                       "-X", "max.partition.fetch.bytes=4194304",
                                       "-f", "%p\t%k\t%h\n"], stdout=o, stderr=e)

    def lines(self, quiet_s=2.0):
        """Once the drain is over: waits until the file grew none for quiet_s; stops kcat."""
        last, since = -1, time.time()
        while time.time() - since < quiet_s:
            n = os.path.getsize(self.path)
            if n != last:
                last, since = n, time.time()
            time.sleep(0.2)
        self.p.terminate()
        self.p.wait()
        with open(self.path) as f:
            out_lines = [x.rstrip("\n") for x in f if x.strip()]
        with open(self.err) as f:
            errors = [x for x in f if "offset reset" in x or "ERROR" in x]
        return out_lines, errors


def consume(bootstrap, topic, fmt, expected):
    """kcat's lines for every message of a small topic, read after the fact."""
    lines = []
    for _ in range(3):
        p = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                            "-q", "-f", fmt], capture_output=True, text=True, timeout=300)
        lines = [x for x in p.stdout.split("\n") if x]
        if len(lines) >= expected:
            break
        time.sleep(1)
    return lines


def partition_map(a, args):
    """key -> partition, as the sink's partitioner places them: one probe event per key, read
    back by kcat."""
    enqueue_backlog(a, "probe", args.keys, args.keys)
    wait_unconfigured(a)
    a.configure("kafka", {"bootstrap.servers": args.bootstrap})
    if not a.wait_drained(60):
        raise RuntimeError("the probe events were not delivered: %r" % (a.worker(),))
    a.ex("SELECT outbox.unconfigure_sink()")
    where = {}
    for line in consume(args.bootstrap, "outbox.event.probe", "%p\t%k\n", args.keys):
        p, k = line.split("\t", 1)
        where[k] = int(p)
    if len(where) != args.keys:
        raise RuntimeError("kcat read %d of the %d probe keys" % (len(where), args.keys))
    return where


def check_topic(lines, events, where):
    """(missing ids, unknown ids, duplicates, keys out of order, keys off their partition)."""
    first = {}
    order = collections.defaultdict(list)
    dups = unknown = off = 0
    for line in lines:
        p, k, headers = line.split("\t", 2)
        wid = next((h[3:] for h in headers.split(",") if h.startswith("id=")), None)
        if wid not in events:
            unknown += 1
            continue
        if wid in first:
            dups += 1
            continue
        first[wid] = True
        key, seq = events[wid]
        order[key].append(seq)
        off += int(p) != where.get(key, -1)
    inverted = sum(1 for s in order.values() if any(y <= x for x, y in zip(s, s[1:])))
    return len(events) - len(first), unknown, dups, inverted, off


def row_updates(a):
    """Rows updated in outbox.events' partitions so far (the relay's marks, put-backs, ...)."""
    return a.q1("SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables "
                "WHERE schemaname = 'outbox' AND relname LIKE 'events%'")


def relay_ticks():
    """CPU ticks (user + system) of the relay worker so far."""
    with open("/proc/%s/stat" % os.environ["RELAY_PID"]) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def sample(a, states, errors):
    state, error = a.c.execute("SELECT state, left(last_error, 90) FROM outbox._workers()").fetchone()
    # The worker's own word for what it does (pgstat_report_activity), numbers taken out.
    doing = a.q1("SELECT regexp_replace(coalesce(query, ''), '[0-9]+', 'N', 'g') FROM "
                 "pg_stat_activity WHERE pid = %s", (int(os.environ["RELAY_PID"]),))
    states["%s: %s" % (state, (doing or "").replace("outbox relay: ", ""))] += 1
    if error:
        errors[error] += 1
    time.sleep(0.05)


def drain(a, args, label, aggtype, where, fault):
    """One drain; returns a dict of what it measured."""
    events = enqueue_backlog(a, aggtype, args.rows, args.keys)
    topic = "outbox.event." + aggtype
    stuck_keys = {k for k, p in where.items() if p == args.partition}
    wait_unconfigured(a)
    tail = Tail(args, topic)
    time.sleep(1)  # kcat connected and at the beginning
    sent0 = a.events_sent()
    upd0 = row_updates(a)
    a.configure("kafka", {"bootstrap.servers": args.bootstrap})
    t0 = time.time()
    # The mark: --down-at of the backlog sent (the relay's own counter, cheap to poll).
    while a.events_sent() - sent0 < args.down_at * args.rows:
        if time.time() - t0 > args.timeout:
            raise RuntimeError("%s: the drain did not reach the mark: %r" % (label, a.worker()))
        time.sleep(0.005)
    t_mark = time.time()
    cpu_mark = relay_ticks()
    t_up = None
    status = None
    states = collections.Counter()  # the relay's state, sampled every 50 ms from the mark
    errors = collections.Counter()
    if fault:
        answer = mock_command(args, "leader %s %d -1" % (topic, args.partition))
        if answer != "ok":
            raise RuntimeError("mock: leader -1: %s" % answer)
        while time.time() < t_mark + args.leaderless_seconds:
            sample(a, states, errors)
            if status is None and time.time() > t_mark + min(5.0, args.leaderless_seconds / 2):
                # What an operator sees mid-outage.
                status = a.c.execute("SELECT state, held_keys, left(oldest_held_error, 160) "
                                     "FROM outbox.status").fetchone()
        cpu_window, t_cpu = relay_ticks() - cpu_mark, time.time()
        answer = mock_command(args, "leader %s %d 1" % (topic, args.partition))
        t_up = time.time()
        if answer != "ok":
            raise RuntimeError("mock: leader 1: %s" % answer)
    else:
        # Only the cheap counter while the baseline is measured (as in the leaderless window).
        while a.events_sent() - sent0 < args.rows and time.time() - t0 < args.timeout:
            sample(a, states, errors)
        cpu_window, t_cpu = relay_ticks() - cpu_mark, time.time()
    deadline = time.time() + args.timeout
    while a.unpublished() > 0:
        if time.time() > deadline:
            raise RuntimeError("%s: not drained within %.0f s: %r" % (label, args.timeout, a.worker()))
        time.sleep(0.1)
    t_end = time.time()
    hz = os.sysconf("SC_CLK_TCK")
    cpu = cpu_window / hz / (t_cpu - t_mark)
    a.ex("SELECT outbox.unconfigure_sink()")
    time.sleep(1.5)  # the relay's table statistics are flushed at most once a second
    updates = row_updates(a) - upd0

    rows = a.c.execute("SELECT aggregateid, extract(epoch FROM published_at)::float8, attempts, "
                       "dead_at IS NOT NULL FROM outbox.event_status").fetchall()
    healthy = sorted(t for k, t, _, _ in rows if k not in stuck_keys)
    stuck = sorted(t for k, t, _, _ in rows if k in stuck_keys)
    limit = t_up if t_up else float("inf")
    in_window = [t for t in healthy if t_mark < t <= limit]
    end = in_window[-1] if in_window else t_mark
    r = {
        "label": label, "topic": topic, "events": events,
        "healthy": len(healthy), "stuck": len(stuck),
        "drain_s": max(t for _, t, _, _ in rows) - t0,
        "window_n": len(in_window), "window_s": end - t_mark,
        "rate": len(in_window) / (end - t_mark) if end > t_mark else 0.0,
        "healthy_left_at_up": sum(1 for t in healthy if t > limit),
        "stuck_before_up": sum(1 for t in stuck if t <= limit),
        "updates": updates / len(rows), "cpu": cpu,
        "attempts": sum(x for _, _, x, _ in rows), "dead": sum(1 for *_, d in rows if d),
        "status": status, "states": states, "errors": errors, "wall_s": t_end - t0,
        "recovery_s": (stuck[-1] - t_up) if t_up else None,
        # Healthy / stuck events published per second from the mark (the outage's shape).
        "timeline": [(sum(1 for t in healthy if t_mark + i < t <= t_mark + i + 1),
                      sum(1 for t in stuck if t_mark + i < t <= t_mark + i + 1))
                     for i in range(int(min(t_end, t_mark + args.leaderless_seconds + 2) - t_mark) + 1)],
    }
    lines, errors = tail.lines()
    r["check"] = check_topic(lines, events, where)
    r["kcat_errors"] = errors
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=400000)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--down-at", type=float, default=0.25)
    p.add_argument("--leaderless-seconds", type=float, default=30)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--mock-fifo", required=True)
    p.add_argument("--mock-out", required=True)
    p.add_argument("--work", required=True, help="a directory for kcat's output")
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()

    a = Admin()
    a.ex("SELECT outbox.unconfigure_sink()")
    for t in ("probe", "base1", "leaderless", "base2"):
        answer = mock_command(args, "create_topic outbox.event.%s 4" % t)
        if answer != "ok":
            raise RuntimeError("mock: create_topic: %s" % answer)
    where = partition_map(a, args)
    n_stuck = sum(1 for p in where.values() if p == args.partition)
    out("   %d events over %d keys per drain (~%d per key); partition %d has %d of the keys; "
        "the mark: %.0f %% of the backlog sent; leaderless for %.0f s from it" % (
            args.rows, args.keys, args.rows // args.keys, args.partition, n_stuck,
            100 * args.down_at, args.leaderless_seconds))

    runs = [drain(a, args, "baseline", "base1", where, False),
            drain(a, args, "leaderless", "leaderless", where, True),
            drain(a, args, "baseline again", "base2", where, False)]
    for r in runs:
        missing, unknown, dups, inverted, off = r["check"]
        out("   %-15s drain %5.2f s; healthy keys after the mark: %6d in %5.2f s = %7.0f events/s;"
            " relay CPU %3.0f %% (from the mark), %.2f row updates per event; attempts %d, dead %d | kcat: %d"
            " missing, %d unknown, %d duplicates, %d keys out of order, %d off their partition" % (
                r["label"], r["drain_s"], r["window_n"], r["window_s"], r["rate"], 100 * r["cpu"],
                r["updates"], r["attempts"], r["dead"], missing, unknown, dups, inverted, off))
        total = sum(r["states"].values()) or 1
        out("     relay state after the mark (every 50 ms): %s" % ", ".join(
            "%s %.0f %%" % (k, 100.0 * v / total) for k, v in r["states"].most_common(4)))
        for e, _ in r["errors"].most_common(2):
            out("     last_error seen: %s" % e)
        if r["kcat_errors"]:
            out("     kcat fell behind the mock's retention (its check is void): %s" % (
                r["kcat_errors"][0].strip()[:150]))
    f = runs[1]
    if f["status"]:
        out("   mid-outage outbox.status: state %s, held_keys %s, oldest_held_error: %s" % f["status"])
    out("   per second from the mark, healthy-key / stuck-key events published:")
    for r in runs:
        out("     %-15s %s" % (r["label"], " ".join("%d/%d" % x for x in r["timeline"])))
    out("   leaderless: %d stuck-key events published before the leader returned (sent before the"
        " loss), %d healthy-key events still unpublished then; the last stuck event %.2f s after"
        " the leader returned (drain wall time %.1f s)" % (
            f["stuck_before_up"], f["healthy_left_at_up"], f["recovery_s"], f["wall_s"]))

    base = (runs[0]["rate"] + runs[2]["rate"]) / 2
    ratio = f["rate"] / base if base else 0.0
    aa = runs[2]["rate"] / runs[0]["rate"] if runs[0]["rate"] else 0.0
    backoff_max = a.q1("SELECT setting::int FROM pg_settings WHERE name = 'outbox.retry_backoff_max'")
    out("")
    out("   | drain | healthy-key events/s after the mark | ratio to the baselines' mean |")
    out("   | --- | ---: | ---: |")
    for r in runs:
        out("   | %s | %.0f | %.2fx |" % (r["label"], r["rate"], r["rate"] / base if base else 0))
    out("   (A/A: baseline again / baseline = %.2fx)" % aa)
    out("")
    # A drain whose consumer fell behind the mock's retention proves nothing either way.
    read = [r for r in runs if not r["kcat_errors"]]
    checks_ok = f in read and all(
        r["check"][0] == 0 and r["check"][1] == 0 and r["check"][3] == 0 for r in read)
    verdicts = [
        ("healthy keys during the leaderless window >= 0.80x the baselines (%.2fx)" % ratio,
         ratio >= 0.8),
        ("every enqueued id in its topic, per key in seq order (kcat), %s" % (
            ", ".join(r["label"] for r in read) or "no drain read in full"), checks_ok),
        ("stuck keys: all delivered once the leader returned, per key in seq order, no attempt "
         "used; the last %.1f s after it returned (retry_backoff_max %.0f s)" % (
             f["recovery_s"], backoff_max / 1000.0),
         f in read and f["check"][0] == 0 and f["check"][3] == 0 and f["attempts"] == 0
         and f["dead"] == 0),
    ]
    for text, ok in verdicts:
        verdict(text, ok)


if __name__ == "__main__":
    main()
