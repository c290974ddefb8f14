// Parses messages with the CloudEvents SDK (the reference implementation, not outbox's code).
// stdin: one JSON object per line, {"binding": "kafka" | "http", "headers": {...}, "key": ...,
// "body": "..."}; the NATS binding's ce- headers are read as HTTP's. stdout: one JSON object
// per line, the event's attributes and data, or {"error": "..."}.
const readline = require('readline');
const { HTTP, Kafka } = require('cloudevents');

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  const m = JSON.parse(line);
  try {
    const event = m.binding === 'kafka'
      ? Kafka.toEvent({ headers: m.headers, key: m.key, value: m.body })
      : HTTP.toEvent({ headers: m.headers, body: m.body });
    const { id, type, source, subject, time, specversion, datacontenttype, data } = event;
    process.stdout.write(JSON.stringify({ id, type, source, subject, time, specversion,
      datacontenttype, data }) + '\n');
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String(e && e.message || e) }) + '\n');
  }
});
