"""outbox.sink_isolation = process against none, side by side (bench/relay/isolation.sh).

Per round, each variant in a rotated order: (a) drain --rows events enqueued while no sink is
configured, timed from the commit of configure_sink() until nothing is unpublished; (b) one
writer at --rate commits/s for --seconds, latency = published_at - the moment COMMIT
returned. Medians of the rounds; ratios of process to none per round, then their median.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relaybench import (Admin, PAYLOAD_SQL, balanced_order, med, out, pct,  # noqa: E402
                        wait_unconfigured, write_events)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sinks", default="null")
    p.add_argument("--bootstrap", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--seconds", type=float, default=10)
    args = p.parse_args()
    a = Admin()
    options = {"null": {}, "kafka": {"bootstrap.servers": args.bootstrap}}
    variants = [(sink, iso) for sink in args.sinks.split(",") for iso in ("none", "process")]
    labels = ["%s/%s" % v for v in variants]
    drains = {k: [] for k in labels}
    p50s = {k: [] for k in labels}
    p99s = {k: [] for k in labels}
    a.ex("SELECT outbox.unconfigure_sink()")

    def use(iso):
        a.set_guc("outbox.sink_isolation", iso)

    for r in range(args.rounds + 1):  # round 0: warm-up, not counted
        out("   round %d%s" % (r, " (warm-up)" if r == 0 else ""))
        for label in balanced_order(labels, r):
            sink, iso = label.split("/")
            use(iso)
            wait_unconfigured(a)
            a.ex("TRUNCATE outbox.events")
            rows = args.rows if r else min(args.rows, 10000)
            a.ex("SELECT count(outbox.enqueue('order', (g %% 1000)::text, 'OrderPlaced', %s)) "
                 "FROM generate_series(1, %d) g" % (PAYLOAD_SQL, rows))
            a.ex("ANALYZE outbox.events")
            a.ex("CHECKPOINT")
            a.configure(sink, options[sink])
            t0 = time.time()
            while a.unpublished() > 0:
                time.sleep(0.01)
            secs = time.time() - t0
            rec, rate, late = write_events(args.rate, args.seconds if r else 2, 1, "lat", True, seed=r)
            a.wait_drained(60)
            pub = dict(a.c.execute(
                "SELECT id::text, extract(epoch FROM published_at)::float8 FROM outbox.event_status "
                "WHERE aggregatetype = 'lat' AND published_at IS NOT NULL").fetchall())
            lat = [1000 * (pub[i] - ta) for i, tb, ta in rec if i in pub]
            a.ex("SELECT outbox.unconfigure_sink()")
            out("      %-14s drain %7.0f events/s   latency at %.0f/s: p50 %.3f ms  p99 %.3f ms%s" % (
                label, rows / secs, rate, pct(lat, 50), pct(lat, 99),
                "  (%d commits late: machine busy)" % late if late else ""))
            if r:
                drains[label].append(rows / secs)
                p50s[label].append(pct(lat, 50))
                p99s[label].append(pct(lat, 99))
    use(None)
    out("")
    out("   | sink | isolation | drain events/s | vs none | p50 ms | p99 ms | p50 vs none |")
    out("   | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    verdicts = []
    for sink in args.sinks.split(","):
        base = "%s/none" % sink
        for iso in ("none", "process"):
            k = "%s/%s" % (sink, iso)
            ratio = med([x / y for x, y in zip(drains[k], drains[base])])
            dp50 = med([x - y for x, y in zip(p50s[k], p50s[base])])
            out("   | %s | %s | %.0f | %.2fx | %.3f | %.3f | %+.3f ms |" % (
                sink, iso, med(drains[k]), ratio, med(p50s[k]), med(p99s[k]), dp50))
            if iso == "process":
                verdicts.append(("%s: process drains >= 0.90x none" % sink, ratio >= 0.9))
                verdicts.append(("%s: process p50 <= none + 0.2 ms" % sink, dp50 <= 0.2))
    out("")
    for text, ok in verdicts:
        out("%s: %s" % ("MET" if ok else "MISSED", text))


if __name__ == "__main__":
    main()
