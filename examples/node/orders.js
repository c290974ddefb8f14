// The transactional outbox from Node.js with node-postgres (pg): an order row and its event
// commit together, or neither does.
//
//   npm ci && node orders.js                                  # the PG* environment variables
//   node orders.js 'postgresql://app@/shop?host=/var/run/postgresql'    # or a connection URI
//
// It prints one line per transaction; test/t/024_examples.pl reads them.
'use strict';

const crypto = require('node:crypto');
const { Client } = require('pg');

const CREATE_ORDERS = `
CREATE TABLE IF NOT EXISTS example_orders (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    total    numeric(12, 2) NOT NULL
)`;

// Runs work(client) between BEGIN and COMMIT on one connection; an exception rolls back.
async function inTransaction(client, work) {
  await client.query('BEGIN');
  try {
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

// Writes one event in the caller's transaction and returns its id. Every value is a bound
// parameter; the payload goes as JSON text cast to jsonb. eventId, when given, is the
// idempotency key.
async function enqueue(client, aggregateId, type, payload, eventId = null) {
  const { rows } = await client.query(
    'SELECT outbox.enqueue($1, $2, $3, $4::jsonb, id => $5::uuid) AS id',
    ['order', String(aggregateId), type, JSON.stringify(payload), eventId],
  );
  return rows[0].id;
}

async function insertOrder(client, customer, total) {
  const { rows } = await client.query(
    'INSERT INTO example_orders (customer, total) VALUES ($1, $2) RETURNING id',
    [customer, total],
  );
  return rows[0].id; // bigint comes back as a string: exact
}

class OutOfStock extends Error {}

async function main() {
  const uri = process.argv[2];
  const client = new Client(uri ? { connectionString: uri } : {});
  await client.connect();
  try {
    await client.query(CREATE_ORDERS);

    // One order, one event, one transaction. Amounts travel as strings: exact.
    const [orderId, eventId] = await inTransaction(client, async (c) => {
      const id = await insertOrder(c, 'frank', '42.00');
      const payload = { order_id: Number(id), customer: 'frank', total: '42.00' };
      return [id, await enqueue(c, id, 'OrderCreated', payload)];
    });
    console.log(`committed order=${orderId} event=${eventId}`);

    // An id chosen by the application is an idempotency key. If the outcome of a commit is
    // unknown (the connection dropped during COMMIT), the retry sends the same event with
    // the same id: enqueue writes nothing the second time and returns the same id.
    const paidId = crypto.randomUUID();
    const payment = { order_id: Number(orderId), amount: '42.00' };
    for (let attempt = 0; attempt < 2; attempt++) {
      const returned = await inTransaction(client, (c) =>
        enqueue(c, orderId, 'OrderPaid', payment, paidId),
      );
      if (returned !== paidId) throw new Error(`enqueue returned ${returned}, not ${paidId}`);
      console.log(`retried event=${paidId} returned=${returned}`);
    }

    // An exception inside the transaction rolls it back: no order row, no event.
    let rolledBack = null;
    try {
      await inTransaction(client, async (c) => {
        rolledBack = await insertOrder(c, 'grace', '7.00');
        await enqueue(c, rolledBack, 'OrderCreated', { order_id: Number(rolledBack) });
        throw new OutOfStock('the last item was sold meanwhile');
      });
    } catch (err) {
      if (!(err instanceof OutOfStock)) throw err;
    }
    const { rows } = await client.query('SELECT count(*) AS n FROM example_orders WHERE id = $1', [
      rolledBack,
    ]);
    console.log(`rolled back order=${rolledBack} orders_left=${rows[0].n}`);
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
