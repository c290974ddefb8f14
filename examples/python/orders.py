#!/usr/bin/env python3
"""The transactional outbox from Python with psycopg 3: an order row and its event commit
together, or neither does.

    /usr/bin/python3 orders.py                          # with the PG* environment variables
    /usr/bin/python3 orders.py "host=/tmp dbname=shop"  # or with a libpq connection string

Debian's python3 with python3-psycopg; another python3 (a pyenv, a virtualenv) needs psycopg 3.

It prints one line per transaction; test/t/024_examples.pl reads them.
"""
import sys
import uuid
from decimal import Decimal

import psycopg
from psycopg.types.json import Jsonb

CREATE_ORDERS = """
CREATE TABLE IF NOT EXISTS example_orders (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    total    numeric(12, 2) NOT NULL
)"""


def enqueue(conn, aggregateid, type_, payload, event_id=None):
    """Writes one event in the caller's transaction and returns its id (a uuid.UUID).

    Jsonb() sends the payload as jsonb; event_id, when given, is the idempotency key."""
    row = conn.execute(
        "SELECT outbox.enqueue(%s, %s, %s, %s, id => %s)",
        ("order", str(aggregateid), type_, Jsonb(payload), event_id),
    ).fetchone()
    return row[0]


def create_order(conn, customer, total):
    """Inserts an order and enqueues its OrderCreated event: one transaction."""
    with conn.transaction():
        order_id = conn.execute(
            "INSERT INTO example_orders (customer, total) VALUES (%s, %s) RETURNING id", (customer, total)
        ).fetchone()[0]
        # JSON has no decimal type: the amount travels as a string, exactly.
        payload = {"order_id": order_id, "customer": customer, "total": str(total)}
        event_id = enqueue(conn, order_id, "OrderCreated", payload)
    return order_id, event_id


class OutOfStock(Exception):
    pass


def main():
    dsn = sys.argv[1] if len(sys.argv) > 1 else ""
    # autocommit: each `with conn.transaction()` below is then a real BEGIN ... COMMIT.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(CREATE_ORDERS)

        order_id, event_id = create_order(conn, "dave", Decimal("42.00"))
        print(f"committed order={order_id} event={event_id}")

        # An id chosen by the application is an idempotency key. If the outcome of a commit
        # is unknown (the connection dropped during COMMIT), the retry sends the same event
        # with the same id: enqueue writes nothing the second time and returns the same id.
        paid_id = uuid.uuid4()
        payment = {"order_id": order_id, "amount": "42.00"}
        for _attempt in range(2):
            with conn.transaction():
                returned = enqueue(conn, order_id, "OrderPaid", payment, event_id=paid_id)
            if returned != paid_id:
                raise SystemExit(f"enqueue returned {returned}, not the given id {paid_id}")
            print(f"retried event={paid_id} returned={returned}")

        # An exception inside the transaction rolls it back: no order row, no event.
        rolled_back = None
        try:
            with conn.transaction():
                rolled_back = conn.execute(
                    "INSERT INTO example_orders (customer, total) VALUES (%s, %s) RETURNING id",
                    ("erin", Decimal("7.00")),
                ).fetchone()[0]
                enqueue(conn, rolled_back, "OrderCreated", {"order_id": rolled_back})
                raise OutOfStock("the last item was sold meanwhile")
        except OutOfStock:
            pass
        left = conn.execute(
            "SELECT count(*) FROM example_orders WHERE id = %s", (rolled_back,)
        ).fetchone()[0]
        print(f"rolled back order={rolled_back} orders_left={left}")


if __name__ == "__main__":
    main()
