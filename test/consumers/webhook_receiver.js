// An independent webhook receiver for the HTTP sink's tests: every request is verified with
// the Standard Webhooks reference implementation (standardwebhooks' Webhook.verify, over the
// raw body) and, when it carries ce-* headers, read with the CloudEvents SDK
// (HTTP.toEvent). Appends one JSON line per request to --log:
//   {webhook_id, verified, verified_each, method, url, headers, body, status_returned,
//    cloudevent, received_ms, remote_port}
// (remote_port tells the client's connections apart: keep-alive reuse shows as few ports).
//
//   node webhook_receiver.js --log FILE --port-file FILE [--port N] [--secret whsec_...]...
//                            [--cert PEM --key PEM] [--control FILE]
//
// --port 0 (the default) takes a free port on 127.0.0.1 and writes it to --port-file once
// listening. With --cert and --key it speaks https. --secret may be given several times:
// `verified` is true when the first verifies, verified_each has one entry per secret.
//
// The control file (JSON, read on each request; counters restart when its text changes):
//   {"rules": [{"match_id": "re", "match_key": "re", "every": 7, "status": 503, "times": 2,
//               "delay_ms": 0, "retry_after": "1", "location": "http://..."}]}
// The first rule that matches the request (webhook-id and outbox-aggregateid, regular
// expressions; absent = any; with "every": N, only each N-th request it matches) and has
// times left (absent = unlimited) chooses the answer; otherwise 200.
'use strict';

const fs = require('fs');
const http = require('http');
const https = require('https');
const { Webhook } = require('standardwebhooks');
const { HTTP } = require('cloudevents');

const args = { secret: [] };
for (let i = 2; i < process.argv.length; i += 2) {
  const name = process.argv[i].replace(/^--/, '');
  const value = process.argv[i + 1];
  if (name === 'secret') args.secret.push(value);
  else args[name] = value;
}
if (!args.log || !args['port-file']) {
  console.error('usage: webhook_receiver.js --log FILE --port-file FILE [options]');
  process.exit(2);
}
const hooks = args.secret.map((s) => new Webhook(s));

let controlText = null;
let rules = [];
let used = [];
let seen = [];
function currentRules() {
  let text = '';
  try {
    text = args.control ? fs.readFileSync(args.control, 'utf8') : '';
  } catch (e) {
    text = '';
  }
  if (text !== controlText) {
    controlText = text;
    rules = text.trim() ? JSON.parse(text).rules || [] : [];
    used = rules.map(() => 0);
    seen = rules.map(() => 0);
  }
  return rules;
}

function choose(id, key) {
  const list = currentRules();
  for (let i = 0; i < list.length; i++) {
    const r = list[i];
    if (r.match_id && !new RegExp(r.match_id).test(id)) continue;
    if (r.match_key && !new RegExp(r.match_key).test(key)) continue;
    if (r.times !== undefined && used[i] >= r.times) continue;
    if (r.every !== undefined && ++seen[i] % r.every !== 0) continue;
    used[i]++;
    return r;
  }
  return { status: 200 };
}

function verify(hook, body, headers) {
  try {
    hook.verify(body, headers);
    return true;
  } catch (e) {
    return false;
  }
}

function handle(req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = req.headers;
    const id = headers['webhook-id'] || '';
    const verifiedEach = hooks.map((h) => verify(h, body, headers));
    let cloudevent = null;
    if (headers['ce-id']) {
      try {
        const e = HTTP.toEvent({ headers, body });
        cloudevent = { id: e.id, type: e.type, source: e.source, subject: e.subject,
                       time: e.time, specversion: e.specversion, datacontenttype: e.datacontenttype,
                       data: e.data };
      } catch (err) {
        cloudevent = { error: String(err && err.message ? err.message : err) };
      }
    }
    const rule = choose(id, headers['outbox-aggregateid'] || '');
    const status = rule.status || 200;
    const answer = () => {
      const out = {};
      if (rule.retry_after !== undefined) out['Retry-After'] = String(rule.retry_after);
      if (rule.location !== undefined) out['Location'] = rule.location;
      // Logged before the answer: what the sink sees answered is always in the log.
      fs.appendFileSync(args.log, JSON.stringify({
        webhook_id: id, verified: verifiedEach.length > 0 && verifiedEach[0],
        verified_each: verifiedEach, method: req.method, url: req.url, headers, body,
        status_returned: status, cloudevent, received_ms: Date.now(),
        remote_port: req.socket.remotePort,
      }) + '\n');
      res.writeHead(status, out);
      res.end(status >= 400 ? `status ${status} from the test receiver\n` : '');
    };
    if (rule.delay_ms) setTimeout(answer, rule.delay_ms);
    else answer();
  });
}

const server = args.cert
  ? https.createServer({ cert: fs.readFileSync(args.cert), key: fs.readFileSync(args.key) }, handle)
  : http.createServer(handle);
server.keepAliveTimeout = 60000;
server.listen(Number(args.port || 0), '127.0.0.1', () => {
  const tmp = args['port-file'] + '.tmp';
  fs.writeFileSync(tmp, String(server.address().port));
  fs.renameSync(tmp, args['port-file']);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
