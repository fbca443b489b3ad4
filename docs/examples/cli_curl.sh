#!/usr/bin/env bash
# The standalone sidecar driven with curl and jq: start it, inject faults, watch them hit traffic,
# release, freeze and revive, read the journal, stop it. Run by tests/test_cli.py.
set -euo pipefail
PYTHON=${PYTHON:-python}
out=$(mktemp)
trap 'kill "${server:-}" 2>/dev/null || true; rm -f "$out"' EXIT
check() { [ "$1" = "$2" ] || { echo "expected $2, got $1" >&2; exit 1; }; }

# --8<-- [start:start]
$PYTHON -m pytest_mcpfaults serve --fault 'status(code=503)@health[times=2]' >"$out" &
server=$!
for _ in $(seq 300); do grep -qx 'MCPFAULTS_READY=1' "$out" && break; sleep 0.1; done
. <(grep '^MCPFAULTS_' "$out")  # MCPFAULTS_URL, _MCP_URL, _HEALTH_URL, _CONTROL_URL, _CONTROL_TOKEN
auth="Authorization: Bearer $MCPFAULTS_CONTROL_TOKEN"
# --8<-- [end:start]

# --8<-- [start:health]
for _ in 1 2 3; do curl -s -o /dev/null -w '%{http_code}\n' "$MCPFAULTS_HEALTH_URL"; done  # 503 503 200
# --8<-- [end:health]
codes=$(for _ in 1 2; do curl -s -o /dev/null -w '%{http_code} ' "$MCPFAULTS_HEALTH_URL"; done)
check "$codes" "200 200 "

# --8<-- [start:inject]
curl -s -H "$auth" -X POST "$MCPFAULTS_CONTROL_URL/faults" \
     -d '{"faults": ["hang@health[times=1]", "tool_error(text=boom)@tool:echo"]}'
# {"added": ["hang@health[times=1]", "tool_error(text=boom)@tool:echo"], "faults": [...]}
curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/faults"  # the whole plan, in order
# --8<-- [end:inject]

check "$(curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/faults" | jq -c .faults)" \
      '["status@health[times=2]","hang@health[times=1]","tool_error(text=boom)@tool:echo"]'

# --8<-- [start:release]
curl -s --max-time 10 "$MCPFAULTS_HEALTH_URL" &  # held: no status line, no bytes
probe=$!
until curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/journal" | jq -e '.requests[-1].held' >/dev/null; do
    sleep 0.05
done
curl -s -H "$auth" -X POST "$MCPFAULTS_CONTROL_URL/release"  # {"state": "running"}; the probe gets 200
wait "$probe"
# --8<-- [end:release]

check "$(curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/journal" | jq -r '.requests[-1].held.outcome')" released

# --8<-- [start:errors]
curl -s -o /dev/null -w '%{http_code}\n' -X DELETE "$MCPFAULTS_CONTROL_URL/faults"  # 401: no token
curl -s -H "$auth" -X POST "$MCPFAULTS_CONTROL_URL/faults" -d '{"faults": ["hang@nowhere"]}'
# 400 {"error": "Trigger: target 'nowhere' is unknown; valid targets: ..."}
# --8<-- [end:errors]

check "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$MCPFAULTS_CONTROL_URL/faults")" 401
check "$(curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/faults" | jq '.faults | length')" 3

# --8<-- [start:freeze]
curl -s -H "$auth" -X POST "$MCPFAULTS_CONTROL_URL/freeze"  # {"state": "frozen"}: every request is held
curl -s -H "$auth" -X POST "$MCPFAULTS_CONTROL_URL/revive"  # {"state": "running"}: held requests answered
curl -s -H "$auth" -X DELETE "$MCPFAULTS_CONTROL_URL/faults"  # clear the plan
# --8<-- [end:freeze]

# --8<-- [start:journal]
curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/journal" |
    jq -c '{state, fired, health: [.requests[] | [.path, .status, .held.outcome]]}'
# {"state":"running","fired":{"status":2,"hang":1,"freeze":1},"health":[["/health",503,null],...]}
# --8<-- [end:journal]
check "$(curl -s -H "$auth" "$MCPFAULTS_CONTROL_URL/journal" | jq -c .fired)" '{"status":2,"hang":1,"freeze":1}'

# --8<-- [start:stop]
kill -TERM "$server" && wait "$server"  # exit status 0: held requests released, connections closed
# --8<-- [end:stop]
echo "curl example: ok"
