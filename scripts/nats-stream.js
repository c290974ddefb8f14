// A JetStream client outside outbox (the nats npm package of test/consumers), for
// scripts/demo.sh --sink nats and bench/relay/sinks.sh. Run it with that package on
// NODE_PATH (a copy of test/consumers after `npm ci`):
//   NODE_PATH=DIR/node_modules node scripts/nats-stream.js COMMAND URL STREAM [SUBJECT,...]
// Commands:
//   add   URL STREAM SUBJECTS   creates the stream (file storage, the server's defaults
//                               otherwise: a 2-minute duplicate window); retries for 10 s
//                               while JetStream is not ready yet
//   count URL STREAM            prints how many messages the stream holds
//   read  URL STREAM            one line per stored message, in sequence order:
//                               "SEQ SUBJECT Nats-Msg-Id=ID header=value,... DATA"
'use strict';
const { connect } = require('nats');

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function add(jsm, stream, subjects) {
  const deadline = Date.now() + 10000;
  for (;;) {
    try {
      await jsm.streams.add({ name: stream, subjects: subjects.split(',') });
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await sleep(100);
    }
  }
}

async function read(jsm, stream) {
  const info = await jsm.streams.info(stream);
  const decoder = new TextDecoder();
  for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq });
    const headers = [];
    let msgId = '';
    if (m.header) {
      for (const k of m.header.keys()) {
        if (k === 'Nats-Msg-Id') msgId = m.header.get(k);
        else headers.push(`${k}=${m.header.values(k).join('|')}`);
      }
    }
    process.stdout.write(`${m.seq} ${m.subject} Nats-Msg-Id=${msgId} ${headers.join(',')}\n    ${decoder.decode(m.data)}\n`);
  }
}

async function main() {
  const [command, url, stream, subjects] = process.argv.slice(2);
  if (!command || !url || !stream) {
    throw new Error('usage: nats-stream.js add|count|read URL STREAM [SUBJECT,...]');
  }
  const nc = await connect({ servers: url });
  try {
    // JetStream may still be starting: jetstreamManager() asks for the account's info.
    let jsm;
    for (const deadline = Date.now() + 10000; !jsm;) {
      try {
        jsm = await nc.jetstreamManager();
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await sleep(100);
      }
    }
    if (command === 'add') await add(jsm, stream, subjects);
    else if (command === 'count') process.stdout.write(`${(await jsm.streams.info(stream)).state.messages}\n`);
    else if (command === 'read') await read(jsm, stream);
    else throw new Error(`unknown command ${command}`);
  } finally {
    await nc.close();
  }
}

main().catch((e) => {
  process.stderr.write(`nats-stream.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
