# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # sink_* are read by demo.sh; work is its
# The sinks of scripts/demo.sh; sourced by it, not run. Per sink NAME:
#   sink_start_NAME     starts a receiver on 127.0.0.1 (in the background, its pid added to
#                       demo_pids) and sets sink_options (the JSON for outbox.configure_sink)
#                       and sink_where (what the demo says it delivers to)
#   sink_read_NAME      prints what an independent consumer received
# They use $work (the demo's work directory, which the postgres user owns) and $repo.
# Every receiver is a reference client, not outbox's code: kcat (librdkafka) for Kafka, the
# standardwebhooks and cloudevents npm packages for webhooks, the nats npm package for NATS.

demo_pids=""   # background processes to stop on exit (besides the Kafka mock)
sink_conf=()   # postgresql.conf lines the sink needs

# --- kafka: librdkafka's mock cluster, 1 broker (no Kafka broker exists for this machine)
sink_start_kafka() {
  # It prints its bootstrap servers, then runs until its stdin (a fifo held open on fd 3)
  # closes.
  mkfifo "$work/mock.in"
  test/tools/outbox_kafka_mock 1 <"$work/mock.in" >"$work/mock.out" 2>"$work/mock.log" &
  mock_pid=$!
  exec 3>"$work/mock.in"
  for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.1; done
  bootstrap=$(head -1 "$work/mock.out")
  [ -n "$bootstrap" ] || { echo "the Kafka mock did not start:" >&2; cat "$work/mock.log" >&2; return 1; }
  sink_options="{\"bootstrap.servers\": \"$bootstrap\"}"
  sink_where="Kafka mock cluster at $bootstrap"
}

sink_read_kafka() {
  echo "--- read back from Kafka by an independent consumer (kcat): topic, partition, key, headers, value"
  local topic
  for topic in outbox.event.order outbox.event.customer; do
    kcat -b "$bootstrap" -C -t "$topic" -o beginning -e -q \
      -f '%t [%p] key=%k headers=%h\n    %s\n'
  done
}

# consumers_install: test/consumers' npm packages, in a copy under $work (npm ci: needs the
# npm registry, or its cache).
consumers_install() {
  cp -a test/consumers "$work/consumers"
  progress_run "outbox demo: npm ci (test/consumers' packages)" consumers_npm_ci || {
    echo "outbox demo: npm ci failed in a copy of test/consumers (no network?)" >&2
    return 1
  }
}

consumers_npm_ci() {
  (cd "$work/consumers" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

# free_port: a TCP port nothing listens on at 127.0.0.1 (node: the nats sink needs it anyway).
free_port() {
  # shellcheck disable=SC2016  # JavaScript
  node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# --- http: test/consumers/webhook_receiver.js verifies each request's Standard Webhooks
# signature with the secret the sink signs with, a file under outbox.sink_files_directory.
sink_start_http() {
  consumers_install
  local files="$work/sink_files" secret port
  mkdir -m 750 "$files"
  secret="whsec_$(openssl rand -base64 32)"
  (umask 077 && echo "$secret" >"$files/webhook.secret")
  chown -R postgres: "$files" 2>/dev/null || true
  sink_conf=("outbox.sink_files_directory = '$files'")
  node "$work/consumers/webhook_receiver.js" --log "$work/receiver.log" --port-file "$work/receiver.port" \
    --secret "$secret" >"$work/receiver.out" 2>&1 &
  demo_pids="$demo_pids $!"
  for _ in $(seq 100); do [ -s "$work/receiver.port" ] && break; sleep 0.1; done
  port=$(cat "$work/receiver.port" 2>/dev/null || true)
  [ -n "$port" ] || { echo "the webhook receiver did not start:" >&2; cat "$work/receiver.out" >&2; return 1; }
  # ${aggregatetype} is the sink's URL template, not a shell variable.
  # shellcheck disable=SC2016
  sink_options="{\"url\": \"http://127.0.0.1:$port/hooks/\${aggregatetype}\", \"secret_file\": \"webhook.secret\"}"
  sink_where="webhook receiver at http://127.0.0.1:$port (signing secret in $files/webhook.secret)"
}

sink_read_http() {
  echo "--- what the webhook receiver got (test/consumers/webhook_receiver.js): each request's"
  echo "    signature verified with the standardwebhooks package; URL, headers, body"
  # shellcheck disable=SC2016  # JavaScript
  node -e '
    const fs = require("fs");
    for (const line of fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
      const r = JSON.parse(line);
      const h = r.headers;
      console.log(`${r.method} ${r.url} -> ${r.status_returned}  signature verified: ${r.verified}`);
      console.log(`    webhook-id=${h["webhook-id"]} outbox-type=${h["outbox-type"]} ` +
                  `outbox-aggregateid=${h["outbox-aggregateid"]}` +
                  Object.keys(h).filter((k) => k.startsWith("outbox-header-")).map((k) => ` ${k}=${h[k]}`).join(""));
      console.log(`    ${r.body}`);
    }' "$work/receiver.log"
}

# --- nats: nats-server with JetStream, a stream on outbox.event.> made with the nats npm
# package (test/consumers/nats_stream.js), which also reads the messages back.
sink_start_nats() {
  if [ ! -f "$("$PG_CONFIG" --pkglibdir)/outbox_sink_nats.so" ]; then
    echo "outbox demo: outbox_sink_nats.so not installed in $("$PG_CONFIG" --pkglibdir) (this build has no NATS sink)" >&2
    return 1
  fi
  command -v nats-server >/dev/null || { echo "outbox demo: no nats-server (Debian: nats-server)" >&2; return 1; }
  consumers_install
  local port
  port=$(free_port)
  nats_url="nats://127.0.0.1:$port"
  nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/nats" >"$work/nats.log" 2>&1 &
  demo_pids="$demo_pids $!"
  for _ in $(seq 100); do (exec 4<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  nats_stream add OUTBOX 'outbox.event.>' || { tail -n 20 "$work/nats.log" >&2; return 1; }
  sink_options="{\"servers\": \"$nats_url\"}"
  sink_where="nats-server -js at $nats_url, stream OUTBOX on outbox.event.>"
}

nats_stream() {
  local command=$1
  shift
  node "$work/consumers/nats_stream.js" "$command" "$nats_url" "$@"
}

sink_read_nats() {
  echo "--- read back from the JetStream stream OUTBOX by an independent consumer (the nats npm"
  echo "    package): sequence, subject, headers (Nats-Msg-Id is the event id), data"
  nats_stream read OUTBOX
}

# demo_stop: stops what the demo started, by pid.
demo_stop() {
  local p
  for p in $demo_pids; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if [ -n "${mock_pid:-}" ]; then
    exec 3>&-
    wait "$mock_pid" 2>/dev/null || true
  fi
}
