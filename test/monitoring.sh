#!/usr/bin/env bash
# The alert rules (monitoring/outbox-alerts.yml): valid, and each alert fires on the series
# that should fire it and not on the others (monitoring/outbox-alerts.test.yml). The Grafana
# dashboard (monitoring/grafana-dashboard.json): valid JSON, and every panel's query valid
# PromQL (promtool parses each as a recording rule, the dashboard's $datname made a regex).
# The metrics themselves, and the names the rules and the dashboard use: TAP 045.
set -euo pipefail
cd "$(dirname "$0")/../monitoring"
promtool check rules outbox-alerts.yml
promtool test rules outbox-alerts.test.yml
rules=$(mktemp --suffix=.yml)
trap 'rm -f "$rules"' EXIT
python3 - grafana-dashboard.json >"$rules" <<'PY'
import json, sys
dashboard = json.load(open(sys.argv[1]))
print("groups:\n  - name: dashboard\n    rules:")
n = 0
for panel in dashboard["panels"]:
    for target in panel["targets"]:
        n += 1
        expr = target["expr"].replace("$datname", ".*")
        print(f"      - record: outbox_dashboard_query_{n}\n        expr: {json.dumps(expr)}")
if n == 0:
    sys.exit("no query in the dashboard")
PY
promtool check rules "$rules"
