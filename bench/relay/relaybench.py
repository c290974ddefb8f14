#!/usr/bin/python3
"""The Python side (psycopg 3) of the relay benchmarks in bench/relay/*.sh.

Run by those scripts, against the throwaway cluster they start (RB_DSN), never on its own:

  relaybench.py throughput   relay throughput: the worker vs the article's hand-written relays
  relaybench.py paired       the throughput target alone: worker vs server-side loop, in cycles
  relaybench.py latency      commit -> sink acknowledgement at a steady commit rate
  relaybench.py memory       peak RSS of the relay worker while it drains a backlog
  relaybench.py backlog      one drain of workers.sh: a backlog over many keys, all workers
  relaybench.py listen       a LISTEN session that consumes notifications (writers.sh)
  relaybench.py order        the balanced order of writers_alternating.sh's phases
  relaybench.py phases       the report of writers_alternating.sh (reads its files)
  relaybench.py sinks        every sink: drain throughput and commit -> ack latency (sinks.sh)

Timings are wall clock (time.time(), the same CLOCK_REALTIME the server's
GetCurrentTimestamp() reads on this host), so client and server timestamps compare.
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time

import psycopg

DSN = os.environ.get("RB_DSN", "")

# The article's order event: ~170 bytes of JSON text (~220 bytes as jsonb), built from g.
PAYLOAD_SQL = (
    "jsonb_build_object('order_id', g, 'customer_id', g % 100000 + 1, "
    "'total', (g % 1000) || '.99', 'currency', 'EUR', "
    "'items', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (g % 99999), 'qty', g % 9 + 1)), "
    "'placed_at', now())"
)


def out(*args):
    print(*args, flush=True)


def connect(autocommit=True):
    return psycopg.connect(DSN, autocommit=autocommit)


def pct(values, p):
    """Percentile p (0..100) of a list, linear interpolation (as numpy's default)."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def med(values):
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else float("nan")


def mean_interval(values):
    """Mean and the half-width of its 95 % interval (normal approximation)."""
    n = len(values)
    mean = statistics.fmean(values)
    return mean, (1.96 * statistics.stdev(values) / n ** 0.5 if n > 1 else float("nan"))


def ratio_summary(values):
    """Per-cycle ratios as changes: median, quartiles, mean +- its 95 % interval."""
    mean, half = mean_interval(values)
    return "%+6.1f%% %+6.1f%% %+6.1f%%   %+6.1f%% +- %.1f%%" % (
        100 * (med(values) - 1), 100 * (pct(values, 25) - 1), 100 * (pct(values, 75) - 1),
        100 * (mean - 1), 100 * half)


def print_order(args):
    """Prints the labels of every phase, one per line, cycle after cycle in balanced_order
    (writers_alternating.sh switches by this list)."""
    labels = args.labels.split(",")
    for c in range(args.cycles):
        for label in balanced_order(labels, c):
            out(label)


def balanced_order(labels, c):
    """The order of cycle c's phases: rotation c of labels, mirrored in every second set of
    len(labels) cycles, so that each phase follows each other one equally often."""
    n = len(labels)
    order = [labels[(k + c) % n] for k in range(n)]
    return order[::-1] if (c // n) % 2 == 1 else order


class Admin:
    """A superuser session (autocommit) that drives the relay."""

    def __init__(self):
        self.c = connect()

    def q1(self, query, params=None):
        return self.c.execute(query, params).fetchone()[0]

    def ex(self, query, params=None):
        self.c.execute(query, params)

    def worker(self):
        row = self.c.execute(
            "SELECT pid, state, batches, events_sent, events_failed, events_dead, last_error "
            "FROM outbox._workers()").fetchone()
        keys = ("pid", "state", "batches", "events_sent", "events_failed", "events_dead", "last_error")
        return dict(zip(keys, row))

    def events_sent(self):
        return self.q1("SELECT events_sent FROM outbox._workers()")

    def wait_state(self, states, timeout=15.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.worker()["state"] in states:
                return True
            time.sleep(0.01)
        return False

    def unconfigure(self):
        """No sink: the relay idles (events stay unpublished until a sink is configured)."""
        with self.c.transaction():
            self.ex("DELETE FROM outbox.sink_config")
            self.ex("SELECT outbox._notify_relay()")
        if not self.wait_state(("unconfigured",)):
            raise RuntimeError("the relay did not go unconfigured: %r" % (self.worker(),))

    def configure(self, sink, options):
        self.ex("SELECT outbox.configure_sink(%s, %s::jsonb)", (sink, json.dumps(options)))

    def set_guc(self, name, value):
        """ALTER SYSTEM + reload (None: RESET). The relay rereads its settings at its next
        loop; a reload signal also wakes it."""
        if value is None:
            self.ex("ALTER SYSTEM RESET %s" % name)
        else:
            self.ex("ALTER SYSTEM SET %s = '%s'" % (name, value))
        self.ex("SELECT pg_reload_conf()")
        time.sleep(0.3)

    def unpublished(self):
        # As the drop guard counts: below the relay's saved low-water mark only retries and
        # dead letters can be unpublished, so only the events above it ask the delivery log
        # (a probe each: after a drain by 4 workers, 200,000 probes took minutes).
        return self.q1(
            "SELECT count(*) FROM outbox.event_status e WHERE e.published_at IS NULL "
            "   AND (e.seq >= COALESCE((SELECT max(r.low_water) FROM outbox.relay_state r), 0) "
            "        OR e.dead_at IS NOT NULL OR e.next_attempt_at IS NOT NULL)")

    def wait_drained(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.unpublished() == 0:
                return True
            time.sleep(0.02)
        return False


# ---------------------------------------------------------------------------------------
# throughput


# The article's table comes before it: bench/lib.sh's naive_table_sql, passed in by
# bench/relay/lib.sh's py (only the throughput benchmark needs it).
NAIVE_SETUP = """
CREATE INDEX IF NOT EXISTS outbox_unpublished ON outbox_naive (id) WHERE published_at IS NULL;

-- The article's relay query as a server-side loop: one batch per transaction (COMMIT in a
-- procedure). It reads the same columns as the client relay (into an aggregate: the "null
-- sink" does nothing with them), then marks the batch, commits, and loops.
CREATE OR REPLACE PROCEDURE naive_drain(batch integer)
LANGUAGE plpgsql AS $$
DECLARE
    ids   bigint[];
    bytes bigint;
BEGIN
    LOOP
        SELECT array_agg(id),
               sum(octet_length(aggregatetype) + octet_length(aggregateid) + octet_length(type)
                   + octet_length(payload::text))
          INTO ids, bytes
          FROM (SELECT id, aggregatetype, aggregateid, type, payload
                  FROM outbox_naive
                 WHERE published_at IS NULL
                 ORDER BY id
                 LIMIT batch
                   FOR UPDATE SKIP LOCKED) s;
        EXIT WHEN ids IS NULL;
        UPDATE outbox_naive SET published_at = now() WHERE id = ANY (ids);
        COMMIT;
    END LOOP;
    COMMIT;
END
$$;
"""


def fill(a, table, n):
    """Empties both queues, then writes n article-sized order events into one of them;
    ANALYZE and CHECKPOINT, so that every variant starts from the same state."""
    a.ex("TRUNCATE outbox.events, outbox_naive")
    if table == "outbox":
        a.ex("SELECT count(outbox.enqueue('order', (g %% 100000 + 1)::text, 'OrderPlaced', %s)) "
             "FROM generate_series(1, %d) g" % (PAYLOAD_SQL, n))
        a.ex("ANALYZE outbox.events")
    else:
        a.ex("INSERT INTO outbox_naive (aggregatetype, aggregateid, type, payload) "
             "SELECT 'order', (g %% 100000 + 1)::text, 'OrderPlaced', %s "
             "FROM generate_series(1, %d) g" % (PAYLOAD_SQL, n))
        a.ex("ANALYZE outbox_naive")
    a.ex("CHECKPOINT")


def drain_worker(a, n, sink, options, timeout):
    """Configures the sink and times the relay from that commit until it has sent n events.
    The end is seen in the relay's shared-memory counters (polled every 5 ms: no table
    scan competes with the relay), then checked against the table."""
    w0 = a.worker()
    a.configure(sink, options)
    t0 = time.time()  # the configuring transaction has committed (autocommit)
    deadline = t0 + timeout
    while True:
        time.sleep(0.005)
        if a.events_sent() - w0["events_sent"] >= n:
            t1 = time.time()
            break
        if time.time() > deadline:
            w = a.worker()
            out("      TIMEOUT after %.0f s: %d of %d sent; worker %r" % (
                timeout, w["events_sent"] - w0["events_sent"], n, w))
            a.unconfigure()
            return None
    w1 = a.worker()
    # The relay saves its low-water mark at most once a second; until it passes the
    # backlog, the count below asks the delivery log about every event of it.
    mark_deadline = time.time() + 5
    while time.time() < mark_deadline and not a.q1(
            "SELECT COALESCE((SELECT max(low_water) FROM outbox.relay_state), 0) "
            "     > COALESCE((SELECT max(seq) FROM outbox.events), 0)"):
        time.sleep(0.05)
    left = a.unpublished()
    # This drain's rows of the delivery log: none is older than the sink's configuration.
    first, last = a.c.execute(
        "SELECT extract(epoch FROM min(delivered_at))::float8, extract(epoch FROM max(delivered_at))::float8 "
        "FROM outbox.deliveries WHERE delivered_at >= to_timestamp(%s)", (t0 - 0.05,)).fetchone()
    a.unconfigure()
    if left != 0 or w1["events_failed"] != w0["events_failed"]:
        out("      WARNING: %d left unpublished, %d failed" % (left, w1["events_failed"] - w0["events_failed"]))
    return {
        "rate": n / (t1 - t0),
        "seconds": t1 - t0,
        "startup_ms": 1000 * (first - t0),
        "steady": (n - 1) / (last - first) if last > first else float("nan"),
        "batches": w1["batches"] - w0["batches"],
    }


def drain_client(c, n, batch):
    """The article's hand-written relay: SELECT ... FOR UPDATE SKIP LOCKED, UPDATE ... WHERE id
    = ANY(...), COMMIT, loop; the "null sink" does nothing with the rows it fetched. c is its
    own connection (autocommit off), kept for the whole benchmark like the worker's process."""
    cur = c.cursor()
    total = 0
    t0 = time.time()
    while True:
        cur.execute(
            "SELECT id, aggregatetype, aggregateid, type, payload FROM outbox_naive "
            "WHERE published_at IS NULL ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED", (batch,))
        rows = cur.fetchall()
        if not rows:
            c.commit()
            break
        cur.execute("UPDATE outbox_naive SET published_at = now() WHERE id = ANY(%s::bigint[])",
                    ([r[0] for r in rows],))
        c.commit()
        total += len(rows)
    t1 = time.time()
    if total != n:
        out("      WARNING: the client relay published %d of %d" % (total, n))
    return {"rate": n / (t1 - t0), "seconds": t1 - t0}


def drain_server(a, srv, n, batch):
    """CALL naive_drain(batch) in srv, a session of its own kept for the whole benchmark."""
    t0 = time.time()
    srv.ex("CALL naive_drain(%d)" % batch)
    t1 = time.time()
    left = a.q1("SELECT count(*) FROM outbox_naive WHERE published_at IS NULL")
    if left:
        out("      WARNING: the server loop left %d unpublished" % left)
    return {"rate": n / (t1 - t0), "seconds": t1 - t0}


def throughput(args):
    a = Admin()
    a.ex(os.environ["NAIVE_TABLE_SQL"] + NAIVE_SETUP)
    a.unconfigure()
    kafka = {"bootstrap.servers": args.bootstrap}
    # A topic the script made with one partition (mock command create_topic): a batch is
    # then one ProduceRequest, so no two requests are in flight at once.
    kafka_p1 = {"bootstrap.servers": args.bootstrap, "topic.template": args.topic_p1}
    # (key, label, kind, batch, rows)
    # The Kafka mock answers pipelined requests slowly (see kafka_p1 below), so its default
    # 4-partition topic gets fewer rows where a batch spans several partitions.
    variants = []
    for b in (1, 100, 1000):
        n = args.rows_b1 if b == 1 else args.rows
        variants.append(("relay-null-%d" % b, "relay worker, null sink", "worker-null", b, n))
        nk = {1: args.rows_kafka_b1, 100: args.rows_kafka_b100, 1000: args.rows}[b]
        variants.append(("relay-kafka-%d" % b, "relay worker, Kafka mock (4 partitions)", "worker-kafka", b, nk))
        if b != 1:
            n1 = args.rows_kafka1p_b100 if b == 100 else n
            variants.append(("relay-kafka1p-%d" % b, "relay worker, Kafka mock, 1-partition topic",
                             "worker-kafka1p", b, n1))
            variants.append(("relay-kafka1p0-%d" % b, "  same, linger.ms=0", "worker-kafka1p0", b, n1))
        variants.append(("client-%d" % b, "hand-written client relay (psycopg)", "client", b, n))
        variants.append(("server-%d" % b, "same SQL, server-side loop (plpgsql)", "server", b, n))
    results = {v[0]: [] for v in variants}
    extra = {v[0]: [] for v in variants}
    nv = len(variants)
    # Each relay is a process of its own that lives for the whole run: the worker, the
    # client relay's connection, the server loop's session. None of them is the session that
    # writes the backlogs. (A process maps a page of shared buffers at its first touch: a
    # relay that wrote the rows itself, or one that is new, would compare unfairly.)
    client_conn = connect(autocommit=False)
    srv = Admin()
    out("   warm-up (not counted): each relay drains one %d-event backlog at batch 1000" % args.rows)
    a.set_guc("outbox.batch_size", 1000)
    fill(a, "outbox", args.rows)
    drain_worker(a, args.rows, "null", {}, timeout=max(60.0, args.rows / 100.0))
    fill(a, "naive", args.rows)
    drain_client(client_conn, args.rows, 1000)
    fill(a, "naive", args.rows)
    drain_server(a, srv, args.rows, 1000)
    for r in range(args.rounds):
        out("   round %d/%d:" % (r + 1, args.rounds))
        for k in range(nv):
            key, label, kind, batch, n = variants[(k + r * 5) % nv]
            if kind.startswith("worker"):
                a.set_guc("outbox.batch_size", batch)
                fill(a, "outbox", n)
                sink = "null" if kind == "worker-null" else "kafka"
                options = {"null": {}, "worker-kafka": kafka, "worker-kafka1p": kafka_p1,
                           "worker-kafka1p0": dict(kafka_p1, **{"linger.ms": "0"})}
                res = drain_worker(a, n, sink, options.get(kind, {}), timeout=max(60.0, n / 100.0))
            elif kind == "client":
                fill(a, "naive", n)
                res = drain_client(client_conn, n, batch)
            else:
                fill(a, "naive", n)
                res = drain_server(a, srv, n, batch)
            if res is None:
                results[key].append(None)
                continue
            results[key].append(res["rate"])
            extra[key].append(res)
            more = ""
            if "startup_ms" in res:
                more = "  (first event after %.0f ms, steady %.0f rows/s, %d batches)" % (
                    res["startup_ms"], res["steady"], res["batches"])
            out("      %-16s %7d rows in %6.2f s = %8.0f rows/s%s" % (key, n, res["seconds"], res["rate"], more))
    a.set_guc("outbox.batch_size", None)

    def m(key):
        return med(results[key])

    def paired(num, den):
        """Median of the per-round ratios num/den."""
        rs = [x / y for x, y in zip(results[num], results[den]) if x and y]
        return med(rs)

    out()
    out("-- results: rows/s = rows / seconds from the start (worker: the commit of configure_sink;")
    out("   hand-written relays: their first query) until the queue is empty; median of %d rounds" % args.rounds)
    out()
    out("   %-46s %5s %8s %10s %10s %10s %10s %10s" % ("variant", "batch", "rows", "median/s", "min", "max",
                                                       "1st (ms)", "steady/s"))
    for key, label, kind, batch, n in variants:
        vals = [x for x in results[key] if x]
        st = med([e.get("startup_ms") for e in extra[key]]) if kind.startswith("worker") else None
        sd = med([e.get("steady") for e in extra[key]]) if kind.startswith("worker") else None
        out("   %-46s %5d %8d %10.0f %10.0f %10.0f %10s %10s" % (
            label, batch, n, m(key), min(vals) if vals else float("nan"), max(vals) if vals else float("nan"),
            "%.0f" % st if st is not None else "-", "%.0f" % sd if sd is not None else "-"))
    out()
    out("   ratios (median of the per-round ratios)")
    for b in (1, 100, 1000):
        p1 = ("   kafka 1-partition / null %4.0f%% (linger.ms=0: %.0f%%)" % (
            100 * paired("relay-kafka1p-%d" % b, "relay-null-%d" % b),
            100 * paired("relay-kafka1p0-%d" % b, "relay-null-%d" % b)) if b != 1 else "")
        out("   batch %4d: worker null / server loop %5.2fx   worker null / client %5.2fx   "
            "server loop / client %5.2fx   kafka / null %4.0f%%%s" % (
                b, paired("relay-null-%d" % b, "server-%d" % b), paired("relay-null-%d" % b, "client-%d" % b),
                paired("server-%d" % b, "client-%d" % b),
                100 * paired("relay-kafka-%d" % b, "relay-null-%d" % b), p1))
    out()
    out("   steady state (worker: events between its first and last published_at, i.e. without the wake-up")
    out("   and the creation of the sink):")
    for b in (100, 1000):
        st = {k: med([e["steady"] for e in extra[k]]) for k in
              ("relay-null-%d" % b, "relay-kafka-%d" % b, "relay-kafka1p-%d" % b, "relay-kafka1p0-%d" % b)}
        nl = st["relay-null-%d" % b]
        out("   batch %4d: null %.0f rows/s, Kafka mock %.0f (%.0f%%), 1-partition %.0f (%.0f%%), 1-partition "
            "linger.ms=0 %.0f (%.0f%%)" % (
                b, nl, st["relay-kafka-%d" % b], 100 * st["relay-kafka-%d" % b] / nl,
                st["relay-kafka1p-%d" % b], 100 * st["relay-kafka1p-%d" % b] / nl,
                st["relay-kafka1p0-%d" % b], 100 * st["relay-kafka1p0-%d" % b] / nl))
    out()
    out("   batch 1000 -> batch 1 (commits): worker null %.0fx, server loop %.0fx, client %.0fx" % (
        m("relay-null-1000") / m("relay-null-1"), m("server-1000") / m("server-1"), m("client-1000") / m("client-1")))
    out()
    out("-- targets")
    x = paired("relay-null-1000", "server-1000")
    verdict("worker at batch 1000 >= 2x the server-side naive loop at batch 1000 (measured %.2fx: %.0f vs %.0f rows/s)"
            % (x, m("relay-null-1000"), m("server-1000")), x >= 2.0)
    y = paired("relay-kafka-1000", "relay-null-1000")
    verdict("Kafka mock >= 80%% of the null sink at batch 1000 (measured %.0f%%: %.0f vs %.0f rows/s)"
            % (100 * y, m("relay-kafka-1000"), m("relay-null-1000")), y >= 0.8)
    y = paired("relay-kafka1p-1000", "relay-null-1000")
    verdict("  same with a 1-partition topic (measured %.0f%%: %.0f vs %.0f rows/s)"
            % (100 * y, m("relay-kafka1p-1000"), m("relay-null-1000")), y >= 0.8)
    y = paired("relay-kafka1p0-1000", "relay-null-1000")
    verdict("  same with a 1-partition topic and linger.ms=0 (measured %.0f%%: %.0f vs %.0f rows/s)"
            % (100 * y, m("relay-kafka1p0-1000"), m("relay-null-1000")), y >= 0.8)
    out("   reference (this project's machines, earlier): client relay ~30k rows/s, server loop ~40k rows/s at batch 1000;")
    out("   article: 1,627 rows/s at batch 1, 104,656 at batch 1000")


def throughput_pairs(args):
    """The throughput target alone, measured in cycles of three back-to-back drains at batch
    1000: the worker (null sink), the server-side loop, and the server-side loop again (the
    A/A control). Per cycle: worker / server loop and control / server loop. Also per drain
    the WAL it wrote, and per cycle the latency of a small synchronous commit (a probe of
    the disk's state at that moment)."""
    a = Admin()
    a.ex(os.environ["NAIVE_TABLE_SQL"] + NAIVE_SETUP + "CREATE TABLE commit_probe (x int);")
    a.unconfigure()
    a.set_guc("outbox.batch_size", args.batch)
    srv = Admin()
    n = args.rows
    timeout = max(60.0, n / 100.0)

    def drain(label):
        """(rows/s, WAL bytes per row) of one drain of a fresh n-event backlog."""
        fill(a, "outbox" if label == "worker" else "naive", n)
        lsn = a.q1("SELECT pg_current_wal_insert_lsn()")
        if label == "worker":
            res = drain_worker(a, n, "null", {}, timeout)
        else:
            res = drain_server(a, srv, n, args.batch)
        wal = a.q1("SELECT pg_current_wal_insert_lsn() - %s::pg_lsn", (lsn,))
        return (res["rate"], float(wal) / n) if res else (None, None)

    def commit_ms(count=20):
        """Milliseconds per commit of a one-row INSERT (each waits for its WAL flush)."""
        t0 = time.time()
        for _ in range(count):
            a.ex("INSERT INTO commit_probe VALUES (1)")
        return 1000 * (time.time() - t0) / count

    out("   warm-up (not counted): one drain of each")
    drain("worker")
    drain("server")
    labels = ["worker", "server", "control"]
    cycles = []
    for c in range(args.cycles):
        probe = commit_ms()
        rates, wal = {}, {}
        for label in balanced_order(labels, c):
            rates[label], wal[label] = drain(label)
        cycles.append((rates, wal, probe))
        out("   cycle %3d/%d: %s   worker / server loop %.2fx, control %.2fx   commit %.2f ms" % (
            c + 1, args.cycles, "  ".join("%s %7.0f" % (k, rates[k] or 0) for k in labels),
            (rates["worker"] or 0) / rates["server"], rates["control"] / rates["server"], probe))
    a.set_guc("outbox.batch_size", None)
    complete = [cy for cy in cycles if all(cy[0].values())]
    ratio = {lab: [cy[0][lab] / cy[0]["server"] for cy in complete] for lab in ("worker", "control")}
    out()
    out("-- results: %d complete cycles of %d-event drains at batch %d; rows/s and WAL per row: median"
        % (len(complete), n, args.batch))
    out("   of the drains; x loop: the per-cycle ratios to the server-side loop, their median, quartiles,")
    out("   and mean +- its 95 % interval")
    out("   %-34s %9s %9s %7s %7s %7s %16s" % ("variant", "rows/s", "WAL/row", "x loop", "q1", "q3", "mean"))
    names = {"worker": "relay worker, null sink", "server": "server-side loop (plpgsql)",
             "control": "control: server-side loop again"}
    for lab in labels:
        cols = ""
        if lab in ratio:
            mean, half = mean_interval(ratio[lab])
            cols = "%6.2fx %6.2fx %6.2fx   %6.2fx +- %.2f" % (
                med(ratio[lab]), pct(ratio[lab], 25), pct(ratio[lab], 75), mean, half)
        out("   %-34s %9.0f %7.0f B %s" % (names[lab], med([cy[0][lab] for cy in complete]),
                                          med([cy[1][lab] for cy in complete]), cols))
    x = med(ratio["worker"])
    out("   worker / server loop >= 2x in %d of %d cycles" % (
        sum(1 for v in ratio["worker"] if v >= 2.0), len(ratio["worker"])))
    # The loop commits every batch and the worker every few: a slower disk costs the loop more.
    probes = [cy[2] for cy in complete]
    cut = med(probes)
    for name, part in (("below", [r for r, p in zip(ratio["worker"], probes) if p <= cut]),
                       ("above", [r for r, p in zip(ratio["worker"], probes) if p > cut])):
        if part:
            out("   cycles whose commit probe was %s its median (%.2f ms): %d, worker / server loop %.2fx"
                % (name, cut, len(part), med(part)))
    out()
    out("-- target")
    verdict("worker at batch %d >= 2x the server-side naive loop (median of %d paired cycles: %.2fx)"
            % (args.batch, len(complete), x), x >= 2.0)
    out("RATIO %.4f" % x)


def verdict(text, ok):
    out(("MET     " if ok else "MISSED  ") + text)


# ---------------------------------------------------------------------------------------
# latency


def write_events(rate, seconds, warmup, aggtype, wake, poisson=False, seed=0):
    """One session commits one enqueue per transaction at `rate` per second: evenly spaced,
    or (poisson) at the times of a Poisson process of that rate (exponential gaps, seeded),
    so that commits also come in bursts. Returns (id, time before COMMIT, time COMMIT
    returned) of the events after the warm-up."""
    c = connect(autocommit=False)
    cur = c.cursor()
    if not wake:
        cur.execute("SET outbox.wake_at_commit = off")
        c.commit()
    payload = json.dumps({"order_id": 0, "customer_id": 42, "total": "557.99", "currency": "EUR",
                          "items": [{"sku": "SKU-70801", "qty": 9}], "placed_at": "2026-11-29 22:02:10+00"})
    n_warm = int(rate * warmup)
    n = n_warm + int(rate * seconds)
    rec = []
    late = 0
    gaps = random.Random(seed)
    start = time.time() + 0.05
    target = start
    for k in range(n):
        target = target + gaps.expovariate(rate) if poisson else start + k / rate
        now = time.time()
        if target > now:
            time.sleep(target - now)
        elif now - target > 0.005:
            late += 1
        cur.execute("SELECT outbox.enqueue(%s, %s, 'OrderPlaced', %s::jsonb)::text", (aggtype, str(k % 1000), payload))
        eid = cur.fetchone()[0]
        tb = time.time()
        c.commit()
        ta = time.time()
        if k >= n_warm:
            rec.append((eid, tb, ta))
    elapsed = time.time() - start
    c.close()
    return rec, n / elapsed, late


def kafka_timestamps(bootstrap, topic, expected):
    """id -> Kafka message timestamp (ms, CreateTime) read back by kcat, an independent consumer."""
    ts = {}
    for _ in range(3):
        p = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                            "-f", "%T %h\n"], capture_output=True, text=True, timeout=120)
        ts = {}
        for line in p.stdout.splitlines():
            parts = line.split(" ", 1)
            if len(parts) != 2:
                continue
            for h in parts[1].split(","):
                if h.startswith("id="):
                    ts[h[3:]] = int(parts[0])
        if len(ts) >= expected:
            break
        time.sleep(1)
    return ts


def mock_command(args, line):
    """Sends one command to the Kafka mock through its input fifo; returns its answer."""
    with open(args.mock_out) as f:
        before = len(f.readlines())
    with open(args.mock_fifo, "w") as f:
        f.write(line + "\n")
    for _ in range(50):
        with open(args.mock_out) as f:
            lines = f.readlines()
        if len(lines) > before:
            return lines[-1].strip()
        time.sleep(0.05)
    return "(no answer)"


def latency(args):
    a = Admin()
    kafka_now = {"bootstrap.servers": args.bootstrap, "timestamp": "now"}
    kafka_l0 = dict(kafka_now, **{"linger.ms": "0"})
    # (key, label, sink, options, wake at commit, poll interval, partitions of the topic)
    # The mock does not set TCP_NODELAY: when two ProduceRequests (two partitions) are in
    # flight, the second answer waits for the client's delayed ACK (~40 ms). A batch for a
    # 1-partition topic is one request, which is what a real broker answers without delay.
    # The "-poisson" variants: the same rate, with the commits at the times of a Poisson
    # process (bursts and gaps) instead of evenly spaced.
    variants = [
        ("null-wake", "null sink, woken at commit", "null", {}, True, None, 0),
        ("kafka-wake", "Kafka mock, 4 partitions, woken at commit", "kafka", kafka_now, True, None, 4),
        ("kafka1-wake", "Kafka mock, 1 partition, woken at commit", "kafka", kafka_now, True, None, 1),
        ("kafka1l0-wake", "Kafka 1 partition, linger.ms=0, woken", "kafka", kafka_l0, True, None, 1),
        ("null-poisson", "null sink, woken, Poisson arrivals", "null", {}, True, None, 0),
        ("kafka-poisson", "Kafka mock, 4 partitions, Poisson arrivals", "kafka", kafka_now, True, None, 4),
        ("null-poll", "null sink, poll 100ms only (wake off)", "null", {}, False, "100ms", 0),
        ("kafka1-poll", "Kafka 1 partition, poll 100ms only", "kafka", kafka_now, False, "100ms", 1),
    ]
    res = {v[0]: [] for v in variants}
    pooled = {v[0]: {"pub": [], "kts": []} for v in variants}
    nv = len(variants)
    for r in range(args.rounds):
        out("   round %d/%d:" % (r + 1, args.rounds))
        for k in range(nv):
            key, label, sink, options, wake, poll, partitions = variants[(k + r) % nv]
            aggtype = "lat_r%d_%s" % (r + 1, key.replace("-", "_"))
            if partitions:
                answer = mock_command(args, "create_topic outbox.event.%s %d" % (aggtype, partitions))
                if answer != "ok":
                    out("      WARNING: create_topic: %s" % answer)
            a.set_guc("outbox.poll_interval", poll)
            a.configure(sink, options)
            a.wait_drained(30)
            rec, rate, late = write_events(args.rate, args.seconds, args.warmup, aggtype, wake,
                                           poisson=key.endswith("-poisson"), seed=r * nv + k)
            if not a.wait_drained(60):
                out("      WARNING: %s: events still unpublished after 60 s" % key)
            pub = dict(a.c.execute(
                "SELECT id::text, extract(epoch FROM published_at)::float8 FROM outbox.event_status "
                "WHERE aggregatetype = %s AND published_at IS NOT NULL", (aggtype,)).fetchall())
            lat = [1000 * (pub[i] - ta) for i, tb, ta in rec if i in pub]
            lat_b = [1000 * (pub[i] - tb) for i, tb, ta in rec if i in pub]
            row = {"p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat), "n": len(lat),
                   "neg": sum(1 for x in lat if x < 0), "p50b": pct(lat_b, 50), "p99b": pct(lat_b, 99),
                   "rate": rate, "late": late}
            pooled[key]["pub"] += lat
            msg = "      %-12s %5d events at %5.1f/s: commit->published_at p50 %7.3f ms p99 %7.3f ms max %7.2f ms" % (
                key, len(lat), rate, row["p50"], row["p99"], row["max"])
            if sink == "kafka":
                kts = kafka_timestamps(args.bootstrap, "outbox.event." + aggtype, len(rec))
                kl = [kts[i] - 1000 * ta for i, tb, ta in rec if i in kts]
                row.update({"kp50": pct(kl, 50), "kp99": pct(kl, 99), "kn": len(kl)})
                pooled[key]["kts"] += kl
                msg += "; commit->Kafka timestamp p50 %5.1f p99 %5.1f ms (%d read back)" % (row["kp50"], row["kp99"], len(kl))
            out(msg)
            res[key].append(row)
    a.set_guc("outbox.poll_interval", None)

    out()
    out("-- results: latency from COMMIT returning in the writer to ...")
    out("   (i)  published_at: the relay's clock right after the sink acknowledged the batch")
    out("        (before the relay's own commit), microseconds;")
    out("   (ii) the Kafka message timestamp (\"timestamp\": \"now\": set by librdkafka when the relay")
    out("        hands it the message, i.e. before the broker's ack), read back with kcat, milliseconds.")
    out("   Median over %d rounds of each round's p50 / p99 (%d s at %d commits/s per round);" % (
        args.rounds, args.seconds, args.rate))
    out("   'pooled' = percentiles of all rounds' events together.")
    out()
    out("   %-42s %9s %9s %9s %9s %10s %10s %9s %8s %8s" % (
        "variant", "(i) p50", "(i) p99", "pool p50", "pool p99", "<0", "sent p50", "sent p99",
        "(ii) p50", "(ii) p99"))
    for key, label, sink, options, wake, poll, partitions in variants:
        rows = res[key]
        p50 = med([x["p50"] for x in rows])
        p99 = med([x["p99"] for x in rows])
        neg = sum(x["neg"] for x in rows)
        tot = sum(x["n"] for x in rows)
        k50 = med([x.get("kp50") for x in rows]) if sink == "kafka" else None
        k99 = med([x.get("kp99") for x in rows]) if sink == "kafka" else None
        out("   %-42s %9.3f %9.3f %9.3f %9.3f %10s %10.3f %9.3f %8s %8s" % (
            label, p50, p99, pct(pooled[key]["pub"], 50), pct(pooled[key]["pub"], 99), "%d/%d" % (neg, tot),
            med([x["p50b"] for x in rows]), med([x["p99b"] for x in rows]),
            "%.1f" % k50 if k50 is not None else "-", "%.1f" % k99 if k99 is not None else "-"))
        res[key + "/p50"] = p50
        res[key + "/p99"] = p99
    out("   <0: events whose published_at came before COMMIT returned in the writer (the relay is woken")
    out("   inside the commit, before the client has read the answer). 'sent': the same, (i), measured from")
    out("   the moment the writer sent COMMIT instead (an upper bound: it includes the writer's own fsync).")
    out()
    out("   writer: %.1f commits/s achieved (median), at most %d of the scheduled commits started >5 ms late per round" % (
        med([x["rate"] for k in res if "/" not in k for x in res[k]]),
        max(x["late"] for k in res if "/" not in k for x in res[k])))
    out()
    out("-- targets (definition (i))")
    for key, label in (("null-wake", "null sink"), ("kafka-wake", "Kafka mock, 4 partitions"),
                       ("kafka1-wake", "Kafka mock, 1 partition (the sink's defaults)"),
                       ("kafka1l0-wake", "Kafka mock, 1 partition, linger.ms=0"),
                       ("null-poisson", "null sink, Poisson arrivals"),
                       ("kafka-poisson", "Kafka mock, 4 partitions, Poisson arrivals")):
        verdict("%s, woken at commit: p50 <= 1 ms (measured %.3f ms)" % (label, res[key + "/p50"]),
                res[key + "/p50"] <= 1.0)
        verdict("%s, woken at commit: p99 <= 5 ms (measured %.3f ms)" % (label, res[key + "/p99"]),
                res[key + "/p99"] <= 5.0)
    out("   article's peer: LISTEN/NOTIFY 2.9 / 22 ms, polling every 100 ms 55 / 106 ms (p50 / p99)")


# ---------------------------------------------------------------------------------------
# memory

MIXED_SQL = """
SELECT count(outbox.enqueue('order', (g %% 100000 + 1)::text, 'OrderPlaced',
  CASE WHEN g %% 100000 < 300 THEN jsonb_build_object('order_id', g, 'blob', repeat(md5(g::text), 3125))
       WHEN g %% 100 = 7      THEN jsonb_build_object('order_id', g, 'blob', repeat(md5(g::text), 625))
       WHEN g %% 10 = 3       THEN jsonb_build_object('order_id', g, 'blob', repeat(md5(g::text), 62))
       ELSE %s END))
  FROM generate_series(1, %d) g
"""


def proc_status(pid):
    d = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                d[k] = int(v.split()[0])  # kB
    return d


def memory(args):
    a = Admin()
    a.unconfigure()
    a.set_guc("outbox.batch_max_bytes", args.batch_max_bytes)
    kafka = {"bootstrap.servers": args.bootstrap}
    sizes = (args.small, args.big)
    variants = [(s, n) for s in ("null", "kafka") for n in sizes]
    res = {v: [] for v in variants}
    pid = a.worker()["pid"]
    out("   relay worker pid %d; at start: %s (kB)" % (pid, proc_status(pid)))
    for r in range(args.rounds):
        out("   round %d/%d:" % (r + 1, args.rounds))
        for k in range(len(variants)):
            sink, n = variants[(k + r) % len(variants)]
            a.ex("TRUNCATE outbox.events")
            t = time.time()
            a.ex(MIXED_SQL % (PAYLOAD_SQL, n))
            a.ex("ANALYZE outbox.events")
            a.ex("CHECKPOINT")
            fill_s = time.time() - t
            payload_mb = a.q1("SELECT sum(octet_length(payload::text)) / 1e6 FROM outbox.events")
            big = a.q1("SELECT count(*) FROM outbox.events WHERE octet_length(payload::text) > 50000")
            if a.worker()["pid"] != pid:
                pid = a.worker()["pid"]
                out("      NOTE: the relay worker restarted (pid %d)" % pid)
            before = proc_status(pid)
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            reset = proc_status(pid)
            w0 = a.worker()
            a.configure(sink, {} if sink == "null" else kafka)
            t0 = time.time()
            peak = dict(reset)
            deadline = t0 + max(120.0, n / 2000.0)
            done = False
            while time.time() < deadline:
                s = proc_status(pid)
                for key in ("VmRSS", "RssAnon", "RssShmem", "RssFile"):
                    peak[key] = max(peak[key], s[key])
                if a.events_sent() - w0["events_sent"] >= n:
                    done = True
                    break
                time.sleep(0.02)
            t1 = time.time()
            after = proc_status(pid)
            w1 = a.worker()
            a.unconfigure()
            # One batch = one published_at (a row of the delivery log has one timestamp).
            big_n, big_mb = a.c.execute(
                "SELECT count(*), sum(octet_length(payload::text)) / 1e6 FROM outbox.event_status "
                "GROUP BY published_at ORDER BY 2 DESC LIMIT 1").fetchone()
            row = {"hwm_life": before["VmHWM"], "rss0": reset["VmRSS"], "anon0": reset["RssAnon"],
                   "hwm": after["VmHWM"], "anon_peak": peak["RssAnon"], "shmem_peak": peak["RssShmem"],
                   "anon_after": after["RssAnon"], "secs": t1 - t0, "done": done,
                   "batches": w1["batches"] - w0["batches"], "big_n": big_n, "big_mb": float(big_mb)}
            res[(sink, n)].append(row)
            out("      %-5s %8d events (%5.0f MB payload text, %4d of ~100 KB; fill %4.1f s), drained in %5.1f s%s, "
                "%d batches (largest: %d events, %.1f MB): VmHWM %7d -> %7d kB (lifetime %7d), RssAnon start %6d "
                "peak %6d after %6d, RssShmem peak %7d"
                % (sink, n, payload_mb, big, fill_s, t1 - t0, "" if done else " (TIMEOUT)", row["batches"],
                   big_n, big_mb, row["rss0"], row["hwm"], row["hwm_life"], row["anon0"], row["anon_peak"],
                   row["anon_after"], row["shmem_peak"]))
    a.set_guc("outbox.batch_max_bytes", None)

    out()
    out("-- results (kB; median of %d rounds). VmHWM is reset (clear_refs 5) before each drain, so" % args.rounds)
    out("   'VmHWM after' is that drain's peak RSS. RSS of a backend also counts the shared buffers it")
    out("   has touched (RssShmem, at most shared_buffers = %s); RssAnon is the worker's private memory" % args.shared_buffers)
    out("   (sampled every 20 ms, so its peak is a lower bound).")
    out()
    out("   %-6s %9s %12s %12s %12s %12s %12s %9s" % ("sink", "events", "RSS start", "VmHWM after", "anon start",
                                                     "anon peak", "shmem peak", "drain s"))
    for v in variants:
        rows = res[v]
        out("   %-6s %9d %12.0f %12.0f %12.0f %12.0f %12.0f %9.1f" % (
            v[0], v[1], med([x["rss0"] for x in rows]), med([x["hwm"] for x in rows]),
            med([x["anon0"] for x in rows]), med([x["anon_peak"] for x in rows]),
            med([x["shmem_peak"] for x in rows]), med([x["secs"] for x in rows])))
    out()
    out("-- bounded? peak of %d events vs %d events (median of the per-round ratios)" % (args.big, args.small))
    for sink in ("null", "kafka"):
        small, big = res[(sink, args.small)], res[(sink, args.big)]
        h = med([b["hwm"] / s["hwm"] for s, b in zip(small, big)])
        an = med([b["anon_peak"] / s["anon_peak"] for s, b in zip(small, big)])
        grow = med([b["anon_peak"] - b["anon0"] for b in big])
        verdict("%s sink: peak RSS does not grow with the backlog (VmHWM %dk/%dk = %.2fx, private peak %.2fx; "
                "private growth during the %d drain %d kB)" % (sink, args.big // 1000, args.small // 1000, h, an,
                                                              args.big, grow),
                h <= 1.10 and an <= 1.10)
    out("   batch_max_bytes = %s; payload classes: 88.7%% ~200 B, 10%% ~2 KB, 1%% ~20 KB, 0.3%% ~100 KB" % args.batch_max_bytes)
    out("   (in runs of 300 consecutive events every 100,000)")
    allrows = [x for v in variants for x in res[v]]
    bn = max(x["big_n"] for x in allrows)
    bm = max(x["big_mb"] for x in allrows)
    verdict("no batch held more than outbox.batch_max_bytes = %s of payload (largest batch seen: %d events, "
            "%.1f MB of payload text)" % (args.batch_max_bytes, bn, bm),
            bm * 1e6 <= parse_bytes(args.batch_max_bytes) * 1.1)


def parse_bytes(text):
    units = {"kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
    for u, f in units.items():
        if text.endswith(u):
            return int(text[:-len(u)]) * f
    return int(text)


# ---------------------------------------------------------------------------------------
# listen: a session that LISTENs and consumes notifications until killed (writers.sh).


def listen(args):
    c = connect()
    c.execute("LISTEN %s" % args.channel)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    n = 0
    for _ in c.notifies():
        n += 1


# ---------------------------------------------------------------------------------------
# phases: the report of writers_alternating.sh, from its files:
#   switches: "K LABEL EPOCH RELAY_TICKS BUSY_TICKS TOTAL_TICKS" at the start of phase K
#             (a last line, label "end", closes the last phase)
#   seconds:  "EPOCH TRANSACTIONS", pgbench's per-second counts


def phases(args):
    sw = []
    with open(args.switches) as f:
        for line in f:
            k, label, at, relay, busy, total = line.split()
            sw.append((int(k), label, float(at), int(relay), int(busy), int(total)))
    per_second = {}
    with open(args.seconds) as f:
        for line in f:
            at, n = line.split()
            per_second[int(at)] = int(n)
    hz = os.sysconf("SC_CLK_TCK")
    rows = {}  # K -> (label, tps, relay % of a core, machine busy %)
    for (k, label, _, relay0, busy0, total0), (_, _, _, relay1, busy1, total1) in zip(sw, sw[1:]):
        first = args.start + k * args.phase
        counts = [per_second.get(s) for s in range(first + 1, first + args.phase)]
        if None in counts:
            continue
        seconds = args.phase
        rows[k] = (label, sum(counts) / len(counts), 100.0 * (relay1 - relay0) / hz / seconds,
                   100.0 * (busy1 - busy0) / max(1, total1 - total0))
    labels = ["on", "off", "control"]
    cycles = {}
    for k, row in rows.items():
        cycles.setdefault(k // 3, {})[row[0]] = row
    complete = [c for c in cycles.values() if len(c) == 3]
    ratio = {lab: [c[lab][1] / c["off"][1] for c in complete] for lab in ("on", "control")}

    out("-- results: %d complete cycles of %d s phases (the first second of each dropped); tps ="
        % (len(complete), args.phase))
    out("   median of the phases' rates; vs off: the per-cycle ratios to the 'off' phase, their")
    out("   median, quartiles, and mean +- its 95 % interval; relay CPU in % of a core, machine busy")
    out("   in % of both cores (whole phases)")
    out("   %-30s %7s %7s %7s %7s %17s %10s %8s" % (
        "phase", "tps", "vs off", "q1", "q3", "mean", "relay CPU", "busy"))
    names = {"on": "wake at commit on (default)", "off": "wake at commit off (poll 1 s)",
             "control": "control: off again"}
    for lab in labels:
        mine = [c[lab] for c in complete]
        tps = med([r[1] for r in mine])
        cpu = med([r[2] for r in mine])
        busy = med([r[3] for r in mine])
        cols = ratio_summary(ratio[lab]) if lab in ratio else "%7s %7s %7s %17s" % ("", "", "", "")
        out("   %-30s %7.0f %s %9.1f%% %7.1f%%" % (names[lab], tps, cols, cpu, busy))
    loss = 1 - med(ratio["on"])
    out("LOSS %.4f" % loss)

# ---------------------------------------------------------------------------------------
# backlog (workers.sh): one drain by however many relay workers the server runs


def relay_rows(a):
    """(pid, state, batches, events_sent, events_failed) of every relay worker slot."""
    return a.c.execute("SELECT pid, state, batches, events_sent, events_failed "
                       "FROM outbox._workers() ORDER BY worker").fetchall()


def wait_unconfigured(a, timeout=15.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = relay_rows(a)
        if rows and all(r[0] and r[1] == "unconfigured" for r in rows):
            return rows
        time.sleep(0.02)
    raise RuntimeError("the relay workers did not all go unconfigured: %r" % (relay_rows(a),))


def cpu_ticks(pids):
    """utime + stime of these processes (clock ticks); None when one of them is gone."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)
    return total


def backlog(args):
    """Fills a backlog of --rows small events over --keys aggregate ids with no sink
    configured, then configures the null sink (--options) and times, from the commit of
    configure_sink(), until the relay's shared-memory counters, polled every --poll-ms (no
    table scan competes with the relay), count the backlog sent: they count a batch once its
    transaction, with its record in the delivery log, has committed. Then, off the clock,
    outbox.event_status must say that none is unpublished.
    Appends "ROUND LABEL RATE SECONDS CPU_S BATCHES FIRST_MS SHARES" to --out."""
    a = Admin()
    a.ex("SELECT outbox.unconfigure_sink()")
    wait_unconfigured(a)
    n = args.rows
    width = max(4, len(str(args.keys)))
    a.ex("TRUNCATE outbox.events")
    a.ex("SELECT count(outbox.enqueue('bench', 'k' || lpad((g %% %d + 1)::text, %d, '0'), 'Tick', "
         "jsonb_build_object('n', g))) FROM generate_series(1, %d) g" % (args.keys, width, n))
    a.ex("ANALYZE outbox.events")
    a.ex("CHECKPOINT")
    w0 = wait_unconfigured(a)
    pids = [r[0] for r in w0]
    hz = os.sysconf("SC_CLK_TCK")
    cpu0 = cpu_ticks(pids)
    sent0 = sum(r[3] for r in w0)
    a.configure("null", json.loads(args.options))
    t0 = time.time()  # the configuring transaction has committed (autocommit)
    deadline = t0 + args.timeout
    t1 = None
    while True:
        time.sleep(args.poll_ms / 1000.0)
        now = time.time()
        if sum(r[3] for r in relay_rows(a)) - sent0 >= n:
            t1 = time.time()
            break
        if now > deadline:
            break
    w1 = relay_rows(a)
    cpu1 = cpu_ticks(pids)
    first = a.q1("SELECT extract(epoch FROM min(delivered_at))::float8 FROM outbox.deliveries "
                 "WHERE delivered_at >= to_timestamp(%f)" % t0)
    left = a.unpublished()
    a.ex("SELECT outbox.unconfigure_sink()")
    wait_unconfigured(a)
    sent = [r1[3] - r0[3] for r0, r1 in zip(w0, w1)]
    failed = sum(r[4] for r in w1) - sum(r[4] for r in w0)
    batches = sum(r[2] for r in w1) - sum(r[2] for r in w0)
    cpu = (cpu1 - cpu0) / hz if cpu0 is not None and cpu1 is not None else float("nan")
    first_ms = 1000 * (first - t0) if first is not None else float("nan")
    shares = "/".join("%.0f" % (100.0 * s / max(1, sum(sent))) for s in sent)
    restarted = [r1[0] for r1 in w1] != pids
    if t1 is None:
        out("      %-26s TIMEOUT after %.0f s: %d of %d left unpublished" % (args.label, args.timeout, left, n))
        return
    rate = n / (t1 - t0)
    out("      %-26s %8.0f events/s  %6.2f s  first event %5.1f ms  relay CPU %5.2f s  %5d batches"
        "  sent per worker %s %%" % (args.label, rate, t1 - t0, first_ms, cpu, batches, shares))
    if failed or sum(sent) != n or restarted or left:
        out("      WARNING: %d failed, %d sent by the counters (backlog %d), %d unpublished%s" % (
            failed, sum(sent), n, left, ", a relay worker restarted" if restarted else ""))
    if args.out:
        with open(args.out, "a") as f:
            f.write("%s %s %.1f %.4f %.3f %d %.1f %s\n" % (
                args.round, args.label, rate, t1 - t0, cpu, batches, first_ms, shares))


# ---------------------------------------------------------------------------------------
# sinks (sinks.sh): every sink, drained and at a steady rate, in one run


def proc_ticks(pid):
    """utime + stime of one process (clock ticks); None without a pid or when it is gone."""
    return cpu_ticks([pid]) if pid else None


def machine_ticks():
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def busy_pct(t0, t1):
    """Percent of both cores busy between two machine_ticks() samples."""
    return 100.0 * (t1[0] - t0[0]) / max(1, t1[1] - t0[1])


def receiver_check(path, offset, n):
    """Reads the webhook receiver's log (one JSON line per request) from byte offset on:
    (requests, verified, distinct webhook-ids acknowledged, new offset). n: the events expected."""
    requests = verified = 0
    acked = set()
    with open(path, "rb") as f:
        f.seek(offset)
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            requests += 1
            verified += 1 if r.get("verified") else 0
            if 200 <= r.get("status_returned", 0) < 300:
                acked.add(r.get("webhook_id"))
        end = f.tell()
    return requests, verified, len(acked), end


def sinks(args):
    """Per sink: (a) drain --rows events enqueued while no sink is configured, timed from the
    commit of configure_sink() until no event is unpublished; (b) one writer at --rate
    commits/s for --seconds, latency = published_at - the moment COMMIT returned. Variants in
    a rotated order per round; medians of the rounds."""
    a = Admin()
    a.ex("SELECT outbox.unconfigure_sink()")
    wait_unconfigured(a)
    variants = [("null", "null", {}, None)]
    variants.append(("kafka", "kafka", {"bootstrap.servers": args.bootstrap}, args.mock_pid))
    variants.append(("http", "http", {"url": args.http_url, "secret_file": args.http_secret_file},
                     args.receiver_pid))
    if args.nats_url:
        variants.append(("nats", "nats", {"servers": args.nats_url}, args.nats_pid))
    names = [v[0] for v in variants]
    by_name = {v[0]: v for v in variants}
    hz = os.sysconf("SC_CLK_TCK")
    drains = {k: [] for k in names}
    lats = {k: [] for k in names}
    log_offset = 0
    if args.receiver_log and os.path.exists(args.receiver_log):
        log_offset = os.path.getsize(args.receiver_log)
    nats_total = 0
    n = args.rows

    def drain(key):
        nonlocal log_offset, nats_total
        _, sink, options, peer = by_name[key]
        a.ex("TRUNCATE outbox.events")
        a.ex("SELECT count(outbox.enqueue('order', (g %% 100000 + 1)::text, 'OrderPlaced', %s)) "
             "FROM generate_series(1, %d) g" % (PAYLOAD_SQL, n))
        a.ex("ANALYZE outbox.events")
        a.ex("CHECKPOINT")
        w0 = wait_unconfigured(a)
        pids = [r[0] for r in w0]
        cpu0, peer0, m0 = cpu_ticks(pids), proc_ticks(peer), machine_ticks()
        sent0 = sum(r[3] for r in w0)
        a.configure(sink, options)
        t0 = time.time()  # the configuring transaction has committed (autocommit)
        deadline = t0 + args.timeout
        t1 = None
        while time.time() < deadline:
            time.sleep(0.005)
            # The counters count a batch once its delivery record committed (as backlog()).
            if sum(r[3] for r in relay_rows(a)) - sent0 >= n:
                t1 = time.time()
                break
        w1 = relay_rows(a)
        cpu1, peer1, m1 = cpu_ticks(pids), proc_ticks(peer), machine_ticks()
        left = a.unpublished()
        first = a.q1("SELECT extract(epoch FROM min(delivered_at))::float8 FROM outbox.deliveries "
                     "WHERE delivered_at >= to_timestamp(%f)" % t0)
        a.ex("SELECT outbox.unconfigure_sink()")
        wait_unconfigured(a)
        failed = sum(r[4] for r in w1) - sum(r[4] for r in w0)
        batches = sum(r[2] for r in w1) - sum(r[2] for r in w0)
        if t1 is None:
            out("      drain   %-6s TIMEOUT after %.0f s: %d of %d left unpublished" % (key, args.timeout, left, n))
            drains[key].append(None)
            return
        secs = t1 - t0
        row = {"rate": n / secs, "secs": secs,
               "relay": 100.0 * (cpu1 - cpu0) / hz / secs if cpu0 is not None and cpu1 is not None else float("nan"),
               "peer": 100.0 * (peer1 - peer0) / hz / secs if peer0 is not None and peer1 is not None else None,
               "first_ms": 1000 * (first - t0) if first is not None else float("nan")}
        drains[key].append(row)
        more = ""
        if key == "http" and args.receiver_log:
            req, ver, acked, log_offset = receiver_check(args.receiver_log, log_offset, n)
            more = "; receiver: %d requests, %d verified, %d ids acknowledged" % (req, ver, acked)
            if ver != req or acked != n:
                more += "  WARNING: not every event was acknowledged once with a valid signature"
        if key == "nats":
            nats_total += n
        out("      drain   %-6s %7d events in %6.2f s = %8.0f events/s  first %5.1f ms  %4d batches  machine busy %3.0f %%"
            "  relay CPU %3.0f %%%s%s" % (key, n, secs, row["rate"], row["first_ms"], batches, busy_pct(m0, m1), row["relay"],
                      "  %s CPU %3.0f %%" % (args.peer_name.get(key, "peer"), row["peer"]) if row["peer"] is not None else "",
                      more))
        if failed or left:
            out("      WARNING: %d failed, %d left unpublished" % (failed, left))

    def latency_run(key, r):
        nonlocal log_offset, nats_total
        _, sink, options, peer = by_name[key]
        aggtype = "lat_r%d_%s" % (r + 1, key)
        a.configure(sink, options)
        a.wait_drained(30)
        peer0, m0 = proc_ticks(peer), machine_ticks()
        t0 = time.time()
        rec, rate, late = write_events(args.rate, args.seconds, args.warmup, aggtype, True, seed=r)
        if not a.wait_drained(60):
            out("      WARNING: %s: events still unpublished after 60 s" % key)
        peer1, m1 = proc_ticks(peer), machine_ticks()
        secs = time.time() - t0
        pub = dict(a.c.execute(
            "SELECT id::text, extract(epoch FROM published_at)::float8 FROM outbox.event_status "
            "WHERE aggregatetype = %s AND published_at IS NOT NULL", (aggtype,)).fetchall())
        total = a.q1("SELECT count(*) FROM outbox.events WHERE aggregatetype = %s", (aggtype,))
        a.ex("SELECT outbox.unconfigure_sink()")
        wait_unconfigured(a)
        lat = [1000 * (pub[i] - ta) for i, tb, ta in rec if i in pub]
        row = {"p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat) if lat else float("nan"),
               "peer": 100.0 * (peer1 - peer0) / hz / secs if peer0 is not None and peer1 is not None else None}
        lats[key].append(row)
        more = ""
        if key == "http" and args.receiver_log:
            req, ver, acked, log_offset = receiver_check(args.receiver_log, log_offset, total)
            more = "; receiver: %d requests, %d verified" % (req, ver)
            if ver != req or acked != total:
                more += "  WARNING: not every event was acknowledged once with a valid signature"
        if key == "nats":
            nats_total += total
        out("      latency %-6s %5d events at %5.1f/s: p50 %7.3f ms  p99 %7.3f ms  max %7.2f ms  machine busy %3.0f %%%s%s" % (
            key, len(lat), rate, row["p50"], row["p99"], row["max"], busy_pct(m0, m1),
            "  %s CPU %3.0f %%" % (args.peer_name.get(key, "peer"), row["peer"]) if row["peer"] is not None else "",
            more))
        if late:
            out("      (%d of the writer's commits started more than 5 ms late: the machine was busy)" % late)

    out("   warm-up (not counted): one drain of %d events per sink" % min(n, 10000))
    full = n
    n = min(full, 10000)
    for key in names:
        drain(key)
    for key in names:
        drains[key] = []
    n = full
    for r in range(args.rounds):
        out("   round %d/%d:" % (r + 1, args.rounds))
        for key in balanced_order(names, r):
            drain(key)
        for key in balanced_order(names, r):
            latency_run(key, r)

    if args.nats_url and args.nats_count_cmd:
        got = subprocess.run(args.nats_count_cmd, shell=True, capture_output=True, text=True)
        # The warm-up's events are in the stream too.
        stored = got.stdout.strip()
        out("   nats: the stream holds %s messages; %d events published to nats in the counted runs (+%d in the"
            " warm-up)" % (stored or "?(%s)" % got.stderr.strip(), nats_total, min(full, 10000)))

    def cell(v, fmt):
        return fmt % v if v is not None and v == v else "-"

    out()
    out("-- results: medians of %d rounds; drain: %d events enqueued with no sink configured, timed from the"
        % (args.rounds, full))
    out("   commit of configure_sink() until none is unpublished; ratio: median of the per-round ratios to")
    out("   the null sink; latency: published_at - COMMIT returned in the writer, %d s at %g commits/s per"
        % (args.seconds, args.rate))
    out("   round (median of the rounds' p50 / p99); CPU: % of one core over the drain (relay: its worker;")
    out("   receiver: the process the sink sends to)")
    out()
    out("| sink | drain events/s | ratio to null | latency p50 ms | p99 ms | relay CPU (drain) | receiver | receiver CPU (drain) | receiver CPU (200/s) |")
    out("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for key in names:
        d = [x for x in drains[key] if x]
        nulls = drains["null"]
        ratios = [x["rate"] / y["rate"] for x, y in zip(drains[key], nulls) if x and y]
        lt = lats[key]
        peer_d = [x["peer"] for x in d if x["peer"] is not None]
        peer_l = [x["peer"] for x in lt if x["peer"] is not None]
        out("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key, "{:,.0f}".format(med([x["rate"] for x in d])) if d else "-",
            cell(med(ratios), "%.2f") if ratios else "-",
            cell(med([x["p50"] for x in lt]), "%.3f"), cell(med([x["p99"] for x in lt]), "%.3f"),
            cell(med([x["relay"] for x in d]), "%.0f %%"),
            args.peer_name.get(key, "-"),
            cell(med(peer_d), "%.0f %%") if peer_d else "-",
            cell(med(peer_l), "%.1f %%") if peer_l else "-"))
    if not args.nats_url:
        out("nats: skipped (no outbox_sink_nats.so)")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--bootstrap", required=True)
    t.add_argument("--rounds", type=int, default=3)
    t.add_argument("--rows", type=int, default=200000)
    t.add_argument("--rows-b1", type=int, default=5000)
    t.add_argument("--rows-kafka-b1", type=int, default=1000)
    t.add_argument("--rows-kafka-b100", type=int, default=20000)
    t.add_argument("--rows-kafka1p-b100", type=int, default=100000)
    t.add_argument("--topic-p1", default="bench.p1")
    t.set_defaults(func=throughput)
    pa = sub.add_parser("paired")
    pa.add_argument("--rows", type=int, default=300000)
    pa.add_argument("--cycles", type=int, default=30)
    pa.add_argument("--batch", type=int, default=1000)
    pa.set_defaults(func=throughput_pairs)
    lt = sub.add_parser("latency")
    lt.add_argument("--bootstrap", required=True)
    lt.add_argument("--rounds", type=int, default=3)
    lt.add_argument("--rate", type=float, default=200)
    lt.add_argument("--seconds", type=float, default=15)
    lt.add_argument("--warmup", type=float, default=1)
    lt.add_argument("--mock-fifo", required=True)
    lt.add_argument("--mock-out", required=True)
    lt.set_defaults(func=latency)
    m = sub.add_parser("memory")
    m.add_argument("--bootstrap", required=True)
    m.add_argument("--rounds", type=int, default=3)
    m.add_argument("--small", type=int, default=200000)
    m.add_argument("--big", type=int, default=1000000)
    m.add_argument("--batch-max-bytes", default="4MB")
    m.add_argument("--shared-buffers", default="?")
    m.set_defaults(func=memory)
    bl = sub.add_parser("backlog")
    bl.add_argument("--rows", type=int, required=True)
    bl.add_argument("--keys", type=int, default=1000)
    bl.add_argument("--options", default="{}", help="the null sink's options (JSON)")
    bl.add_argument("--poll-ms", type=float, default=10)
    bl.add_argument("--timeout", type=float, default=300)
    bl.add_argument("--label", default="drain")
    bl.add_argument("--round", default="0")
    bl.add_argument("--out", default="")
    bl.set_defaults(func=backlog)
    li = sub.add_parser("listen")
    li.add_argument("--channel", default="outbox_events")
    li.set_defaults(func=listen)
    od = sub.add_parser("order")
    od.add_argument("--labels", required=True, help="comma-separated")
    od.add_argument("--cycles", type=int, required=True)
    od.set_defaults(func=print_order)
    sk = sub.add_parser("sinks")
    sk.add_argument("--bootstrap", required=True)
    sk.add_argument("--http-url", required=True)
    sk.add_argument("--http-secret-file", required=True)
    sk.add_argument("--nats-url", default="")
    sk.add_argument("--nats-count-cmd", default="", help="a shell command printing the stream's message count")
    sk.add_argument("--mock-pid", type=int, default=0)
    sk.add_argument("--receiver-pid", type=int, default=0)
    sk.add_argument("--receiver-log", default="")
    sk.add_argument("--nats-pid", type=int, default=0)
    sk.add_argument("--rounds", type=int, default=3)
    sk.add_argument("--rows", type=int, default=100000)
    sk.add_argument("--rate", type=float, default=200)
    sk.add_argument("--seconds", type=float, default=15)
    sk.add_argument("--warmup", type=float, default=1)
    sk.add_argument("--timeout", type=float, default=600)
    sk.set_defaults(func=sinks, peer_name={"kafka": "Kafka mock", "http": "webhook_receiver.js (node)",
                                          "nats": "nats-server"})
    ph = sub.add_parser("phases")
    ph.add_argument("--switches", required=True)
    ph.add_argument("--seconds", required=True)
    ph.add_argument("--start", type=int, required=True)
    ph.add_argument("--phase", type=int, required=True)
    ph.set_defaults(func=phases)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
