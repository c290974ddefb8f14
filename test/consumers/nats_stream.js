// An independent JetStream client (the nats package, not outbox's code), for the TAP tests,
// scripts/demo.sh --sink nats and bench/relay/sinks.sh.
//   node nats_stream.js add  <url> <stream> <subject,...> [duplicate_window_ms]
//                                             (default window: the server's, 2 minutes)
//   node nats_stream.js count <url> <stream>  how many messages the stream holds
//   node nats_stream.js read <url> <stream>   one JSON line per stored message, in sequence
//                                             order: {seq, subject, headers: {name: [values]}, data}
//   node nats_stream.js ce   <url> <stream>   one JSON line per message as the cloudevents SDK
//                                             reads it (binary mode): {seq, id, type, source,
//                                             subject, time, specversion, datacontenttype, data}
'use strict';
const { connect, nanos } = require('nats');
const { HTTP } = require('cloudevents');

async function stored(jsm, stream) {
  const info = await jsm.streams.info(stream);
  const out = [];
  for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
    let m;
    try {
      m = await jsm.streams.getMessage(stream, { seq });
    } catch (e) {
      continue; // deleted
    }
    const headers = {};
    if (m.header) for (const k of m.header.keys()) headers[k] = m.header.values(k);
    out.push({ seq: m.seq, subject: m.subject, headers, data: new TextDecoder().decode(m.data) });
  }
  return out;
}

async function main() {
  const [command, url, stream, subjects, window] = process.argv.slice(2);
  const nc = await connect({ servers: url });
  // A server just started may not have JetStream ready: jetstreamManager() asks for the
  // account's info, and is tried again for 10 s.
  let jsm;
  for (const deadline = Date.now() + 10000; !jsm;) {
    try {
      jsm = await nc.jetstreamManager();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  if (command === 'add') {
    const config = { name: stream, subjects: subjects.split(',') };
    if (window) config.duplicate_window = nanos(Number(window));
    await jsm.streams.add(config);
  } else if (command === 'count') {
    process.stdout.write(`${(await jsm.streams.info(stream)).state.messages}\n`);
  } else if (command === 'read') {
    for (const m of await stored(jsm, stream)) process.stdout.write(JSON.stringify(m) + '\n');
  } else if (command === 'ce') {
    for (const m of await stored(jsm, stream)) {
      const headers = {};
      for (const [k, v] of Object.entries(m.headers)) headers[k.toLowerCase()] = v[0];
      const ev = HTTP.toEvent({ headers, body: m.data });
      process.stdout.write(JSON.stringify({
        seq: m.seq, id: ev.id, type: ev.type, source: ev.source, subject: ev.subject,
        time: ev.time, specversion: ev.specversion, datacontenttype: ev.datacontenttype,
        data: ev.data,
      }) + '\n');
    }
  } else {
    throw new Error('unknown command ' + command);
  }
  await nc.close();
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
