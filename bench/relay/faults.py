"""A destination that misbehaves, side by side with a healthy one (bench/relay/faults.sh).

Each variant drains the same backlog: --rows events over --keys keys (aggregateid g % keys),
enqueued while no sink is configured, timed from the commit of configure_sink() until no
event is unpublished. Then the checks, from the receiver's log: every event acknowledged at
least once with a valid signature, and per key the first acknowledgements in seq order.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relaybench import Admin, out, wait_unconfigured, PAYLOAD_SQL  # noqa: E402


def enqueue_backlog(a, rows, keys):
    a.ex("TRUNCATE outbox.events")
    a.ex("SELECT count(outbox.enqueue('order', 'k' || (g %% %d), 'OrderPlaced', %s)) "
         "FROM generate_series(1, %d) g" % (keys, PAYLOAD_SQL, rows))
    a.ex("ANALYZE outbox.events")
    a.ex("CHECKPOINT")
    return {str(i): (k, s) for i, k, s in a.c.execute(
        "SELECT id, aggregateid, seq FROM outbox.events").fetchall()}


def drain(a, sink, options, n, timeout):
    """Seconds from configure_sink()'s commit until nothing is unpublished (None: timeout)."""
    wait_unconfigured(a)
    a.configure(sink, options)
    t0 = time.time()
    while time.time() - t0 < timeout:
        time.sleep(0.02)
        if a.unpublished() == 0:
            secs = time.time() - t0
            a.ex("SELECT outbox.unconfigure_sink()")
            return secs
    a.ex("SELECT outbox.unconfigure_sink()")
    return None


def check_receiver(path, offset, events):
    """From the receiver's log (one JSON line per request, in arrival order): requests,
    unverified requests, events never acknowledged, keys whose first acknowledgements are
    out of seq order; and the new offset."""
    requests = unverified = 0
    first = {}
    order = {}
    with open(path, "rb") as f:
        f.seek(offset)
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            requests += 1
            unverified += 0 if r.get("verified") else 1
            wid = r.get("webhook_id")
            if 200 <= r.get("status_returned", 0) < 300 and wid in events and wid not in first:
                first[wid] = True
                key, seq = events[wid]
                order.setdefault(key, []).append(seq)
        end = f.tell()
    missing = len(events) - len(first)
    inverted = sum(1 for seqs in order.values() if any(b <= a for a, b in zip(seqs, seqs[1:])))
    return requests, unverified, missing, inverted, end


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--keys", type=int, default=200)
    p.add_argument("--http-url", required=True)
    p.add_argument("--secret-file", required=True)
    p.add_argument("--receiver-log", required=True)
    p.add_argument("--control", required=True)
    p.add_argument("--nginx-url", default="")
    p.add_argument("--outage-seconds", type=float, default=30)
    p.add_argument("--receiver-stop", default="", help="shell command: stop the receiver")
    p.add_argument("--receiver-start", default="", help="shell command: start it again, same port")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()

    a = Admin()
    a.ex("SELECT outbox.unconfigure_sink()")
    signed = {"url": args.http_url, "secret_file": args.secret_file}
    variants = [
        ("null", "null", {}, None),
        ("http healthy", "http", signed, None),
        ("http 1 in 7 answered 503", "http", signed, {"rules": [{"every": 7, "status": 503}]}),
        ("http 1 in 50 timing out (timeout.ms 1000)", "http", dict(signed, **{"timeout.ms": "1000"}),
         {"rules": [{"every": 50, "delay_ms": 1500}]}),
        # Little's law: 8 requests in flight, 1 in 50 holding its slot 1 s, is ~400/s at most.
        ("http 1 in 50 timing out, max_concurrency 64", "http",
         dict(signed, **{"timeout.ms": "1000", "max_concurrency": "64"}),
         {"rules": [{"every": 50, "delay_ms": 1500}]}),
        ("http 1 in 50 timing out, max_concurrency 128", "http",
         dict(signed, **{"timeout.ms": "1000", "max_concurrency": "128"}),
         {"rules": [{"every": 50, "delay_ms": 1500}]}),
    ]
    if args.nginx_url:
        variants.append(("http to nginx (204, unsigned)", "http", {"url": args.nginx_url}, None))
    rates = {}
    offset = os.path.getsize(args.receiver_log) if os.path.exists(args.receiver_log) else 0
    out("   %d events over %d keys per drain, every setting at its default" % (args.rows, args.keys))
    for label, sink, options, control in variants:
        with open(args.control, "w") as f:
            f.write(json.dumps(control) if control else "")
        events = enqueue_backlog(a, args.rows, args.keys)
        attempts0 = 0
        secs = drain(a, sink, options, args.rows, args.timeout)
        if secs is None:
            out("   %-44s TIMEOUT after %.0f s" % (label, args.timeout))
            continue
        rates[label] = args.rows / secs
        attempts = a.q1("SELECT coalesce(sum(attempts), 0) FROM outbox.events") - attempts0
        line = "   %-44s %7.2f s  %8.0f events/s  attempts used %d" % (label, secs, rates[label], attempts)
        if sink == "http" and options.get("secret_file"):
            req, unverified, missing, inverted, offset = check_receiver(args.receiver_log, offset, events)
            line += "  | %d requests, %d unverified, %d never acknowledged, %d keys out of order" % (
                req, unverified, missing, inverted)
        out(line)
    with open(args.control, "w") as f:
        f.write("")

    healthy = rates.get("http healthy")
    out("")
    out("   | variant | events/s | ratio | target |")
    out("   | --- | ---: | ---: | --- |")
    targets = {"http 1 in 7 answered 503": ("http healthy", 0.6),
               "http 1 in 50 timing out (timeout.ms 1000)": ("http healthy", 0.5),
               "http 1 in 50 timing out, max_concurrency 64": ("http healthy", 0.5),
               "http 1 in 50 timing out, max_concurrency 128": ("http healthy", 0.5),
               "http to nginx (204, unsigned)": ("null", 0.25)}
    verdicts = []
    for label, rate in rates.items():
        base, target = targets.get(label, (None, None))
        if base and rates.get(base):
            ratio = rate / rates[base]
            out("   | %s | %.0f | %.2fx %s | >= %.2fx |" % (label, rate, ratio, base, target))
            verdicts.append(("%s >= %.2fx %s" % (label, target, base), ratio >= target))
        else:
            out("   | %s | %.0f | | |" % (label, rate))

    if args.receiver_stop and args.receiver_start:
        events = enqueue_backlog(a, 2000, args.keys)
        subprocess.run(args.receiver_stop, shell=True, check=True)
        a.configure("http", signed)
        time.sleep(args.outage_seconds)
        subprocess.run(args.receiver_start, shell=True, check=True)
        t_up = time.time()
        backoff_max = a.q1("SELECT setting::int FROM pg_settings WHERE name = 'outbox.retry_backoff_max'")
        while a.unpublished() > 0 and time.time() - t_up < args.timeout:
            time.sleep(0.05)
        after = time.time() - t_up
        attempts = a.q1("SELECT coalesce(sum(attempts), 0) FROM outbox.events")
        a.ex("SELECT outbox.unconfigure_sink()")
        out("")
        out("   receiver down %.0f s, then up: everything delivered %.1f s after it was up "
            "(retry_backoff_max %.0f s), attempts used %d" % (
                args.outage_seconds, after, backoff_max / 1000.0, attempts))
        verdicts.append(("outage: delivered within retry_backoff_max of recovery, no attempt used",
                         after <= backoff_max / 1000.0 and attempts == 0))
    out("")
    for text, ok in verdicts:
        out("%s: %s" % ("MET" if ok else "MISSED", text))


if __name__ == "__main__":
    main()
