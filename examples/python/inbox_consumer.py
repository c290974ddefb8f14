#!/usr/bin/env python3
"""The consumer's inbox from Python with psycopg 3: a webhook receiver for outbox's http sink
that applies each event once, although delivery is at least once.

    /usr/bin/python3 inbox_consumer.py --port 8000 --secret-file webhook.secret
    /usr/bin/python3 inbox_consumer.py --port 8000 --secret-file webhook.secret "host=/tmp dbname=shop"

The port and the secret file may also come from INBOX_PORT and WEBHOOK_SECRET_FILE (port 0:
any free port). The database is the consumer's own, where CREATE EXTENSION outbox ran; it
connects with the PG* environment variables or a libpq connection string, as a role with
USAGE on schema outbox and EXECUTE on outbox.inbox_receive (examples/README.md). Debian's
python3 with python3-psycopg; another python3 (a pyenv, a virtualenv) needs psycopg 3.

Each request is checked against its Standard Webhooks signature (401 if it does not match).
Then, in ONE transaction: outbox.inbox_receive() records the event id for this consumer and
says whether it is the first copy; only then is the event applied (an OrderCreated adds its
total to example_revenue); commit; and only then 200. A copy (the relay sends again whatever
it has no 200 for) commits nothing new and gets 200 too.

--lose-ack-every N answers 500 to every Nth request after its commit, as if the receiver had
crashed before answering: the relay sends that event again, and the inbox tells the copy.

It prints one line per request; test/t/046_inbox_consumer.pl reads them.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import threading
import time
import uuid
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

CREATE_REVENUE = """
CREATE TABLE IF NOT EXISTS example_revenue (
    customer text PRIMARY KEY,
    orders   integer NOT NULL,
    total    numeric(14, 2) NOT NULL
)"""

TOLERANCE_S = 5 * 60  # Standard Webhooks: refuse a timestamp further off than this
PRINTING = threading.Lock()


def say(line):
    """Prints a whole line: the server's threads (one per connection) print at once."""
    with PRINTING:
        print(line, flush=True)


def read_keys(path):
    """The HMAC keys of a secret file: whsec_<base64> secrets, whitespace-separated (two
    during a rotation), the same file the http sink's secret_file names."""
    with open(path) as f:
        secrets = f.read().split()
    if not secrets or not all(s.startswith("whsec_") for s in secrets):
        raise SystemExit(f"{path}: expected whsec_<base64> secrets")
    return [base64.b64decode(s[len("whsec_"):]) for s in secrets]


def verified(keys, headers, body):
    """Standard Webhooks: base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")) is one of the
    space-separated "v1,<signature>" of webhook-signature, and the timestamp is recent."""
    msg_id, stamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE_S:
        return False
    signed = f"{msg_id}.{stamp}.".encode() + body
    expected = [base64.b64encode(hmac.new(k, signed, hashlib.sha256).digest()).decode() for k in keys]
    given = [s.split(",", 1)[1] for s in headers.get("webhook-signature", "").split() if s.startswith("v1,")]
    return any(hmac.compare_digest(e, g) for e in expected for g in given)


def apply_event(conn, type_, payload):
    """The consumer's own work. Applied twice, it would count an order's total twice."""
    if type_ == "OrderCreated":
        conn.execute(
            """INSERT INTO example_revenue (customer, orders, total) VALUES (%s, 1, %s)
               ON CONFLICT (customer) DO UPDATE
               SET orders = example_revenue.orders + 1, total = example_revenue.total + excluded.total""",
            (payload["customer"], Decimal(payload["total"])),
        )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the sink reuses its connections

    # One database connection per HTTP connection (the server runs a thread for each).
    def setup(self):
        super().setup()
        self.conn = psycopg.connect(self.server.dsn, autocommit=True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.conn.close()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verified(self.server.keys, self.headers, body):
            say("rejected: bad signature")
            return self.answer(401)
        try:
            event_id = uuid.UUID(self.headers["webhook-id"])  # the event id, the same in every copy
            payload = json.loads(body)
        except ValueError as e:
            say(f"rejected: not an event: {e}")
            return self.answer(400)  # a 4xx: the relay does not send it again
        # The inbox record and the work commit together, or neither does.
        try:
            with self.conn.transaction():
                new = self.conn.execute(
                    "SELECT outbox.inbox_receive(%s, %s)", (self.server.consumer, event_id)
                ).fetchone()[0]
                if new:
                    apply_event(self.conn, self.headers.get("outbox-type"), payload)
        except psycopg.Error as e:  # rolled back: the relay sends it again later
            say(f"failed event={event_id}: {e}")
            self.close_connection = True  # the next HTTP connection gets a new database connection
            return self.answer(503)
        line = f"{'applied' if new else 'duplicate'} event={event_id}"
        if self.server.lose_ack():
            say(line + " ack=lost")
            return self.answer(500)  # committed, but the relay does not know: it sends again
        say(line)
        self.answer(200)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass  # one line per request is printed above


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port, args):
        super().__init__(("127.0.0.1", port), Handler)
        self.dsn, self.consumer = args.dsn, args.consumer
        self.keys = read_keys(args.secret_file)
        self.every, self.requests, self.lock = args.lose_ack_every, 0, threading.Lock()

    def lose_ack(self):
        with self.lock:
            self.requests += 1
            return self.every > 0 and self.requests % self.every == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dsn", nargs="?", default="", help="libpq connection string (default: PG* variables)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("INBOX_PORT", 8000)),
                        help="port on 127.0.0.1 (default: INBOX_PORT or 8000; 0: any free port)")
    parser.add_argument("--secret-file", default=os.environ.get("WEBHOOK_SECRET_FILE"),
                        help="whsec_ secrets (default: WEBHOOK_SECRET_FILE)")
    parser.add_argument("--consumer", default="revenue", help="this consumer's name in outbox.inbox")
    parser.add_argument("--lose-ack-every", type=int, default=0, metavar="N",
                        help="answer 500 to every Nth request, after its commit")
    args = parser.parse_args()
    if not args.secret_file:
        parser.error("--secret-file (or WEBHOOK_SECRET_FILE) is required")
    if args.lose_ack_every == 1:
        parser.error("--lose-ack-every 1 would never acknowledge anything")
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(CREATE_REVENUE)
    server = Server(args.port, args)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
