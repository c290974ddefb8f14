#!/usr/bin/env bash
# A destination that misbehaves, side by side with a healthy one, in one run: how fast the
# relay drains a backlog through the http sink when the receiver answers 503 to 1 request in
# 7, when 1 request in 50 times out, and against nginx answering 204 (a receiver that is
# never the bottleneck), beside the null sink and the healthy receiver; then the receiver
# down for 30 s and back. Every setting and sink option at its default, one relay worker.
#
# The receiver is test/consumers/webhook_receiver.js (node): it verifies every signature
# (standardwebhooks) and logs every request; after each drain the script checks that every
# event was acknowledged at least once with a valid signature and that per key the first
# acknowledgements came in seq order. nginx is Debian's nginx-light, `return 204`.
#
#   bash bench/relay/faults.sh            # 20,000 events over 200 keys per drain, ~3 min
# ROWS, KEYS, OUTAGE_SECONDS override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

ROWS=${ROWS:-20000}
KEYS=${KEYS:-200}
OUTAGE_SECONDS=${OUTAGE_SECONDS:-30}

# nginx_start: nginx on a free port of 127.0.0.1, answering 204 to everything. Sets NGINX_URL.
nginx_start() {
  local port dir="$BENCH_WORK/nginx"
  port=$(free_port)
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location / { return 204; }
  }
}
CONF
  /usr/sbin/nginx -c "$dir/nginx.conf" -p "$dir" 9>&- &
  RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $!"
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  NGINX_URL="http://127.0.0.1:$port/webhooks"
  echo "   $(/usr/sbin/nginx -v 2>&1) $NGINX_URL"
}

relay_header "faults: the http sink against a flaky, a slow and a stopped receiver, beside healthy ones"
relay_start 56314 "autovacuum = off"
consumers_install
receiver_start
nginx_args=()
if [ -x /usr/sbin/nginx ]; then
  nginx_start
  nginx_args=(--nginx-url "$NGINX_URL")
else
  echo "   nginx: skipped (apt-get install nginx-light)"
fi

"$PY" "$RELAY_BENCH_DIR/faults.py" --rows "$ROWS" --keys "$KEYS" \
  --http-url "http://127.0.0.1:$RECEIVER_PORT/webhooks" --secret-file webhook.secret \
  --receiver-log "$BENCH_WORK/receiver.log" --control "$BENCH_WORK/receiver.control" \
  ${nginx_args[@]+"${nginx_args[@]}"} --outage-seconds "$OUTAGE_SECONDS" \
  --receiver-stop "kill $RECEIVER_PID; while kill -0 $RECEIVER_PID 2>/dev/null; do sleep 0.1; done" \
  --receiver-start "node '$BENCH_WORK/consumers/webhook_receiver.js' --log '$BENCH_WORK/receiver.log' \
    --port-file '$BENCH_WORK/receiver.port2' --port $RECEIVER_PORT --secret '$RECEIVER_SECRET' \
    --control '$BENCH_WORK/receiver.control' >>'$BENCH_WORK/receiver.out' 2>&1 9>&- & \
    echo \$! >'$BENCH_WORK/receiver.pid2'"
# The receiver started again after the outage.
kill "$(cat "$BENCH_WORK/receiver.pid2" 2>/dev/null)" 2>/dev/null || true
