#!/usr/bin/env bash
# The alert rules (monitoring/outbox-alerts.yml): valid, and each alert fires on the series
# that should fire it and not on the others (monitoring/outbox-alerts.test.yml). The metrics
# themselves, as outbox.metrics() and the exporter give them: TAP 045.
set -euo pipefail
cd "$(dirname "$0")/../monitoring"
promtool check rules outbox-alerts.yml
promtool test rules outbox-alerts.test.yml
