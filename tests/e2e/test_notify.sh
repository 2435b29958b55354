#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `autobatch notify` and the webhook spool (issue 28): a payload kept
# after a failed delivery goes only to the URL it was kept for, and only
# when notify is run without RESULTS; `notify RESULTS --webhook URL`
# sends RESULTS and nothing else; a webhook that is down costs one series
# of retries (5 attempts), not two; the hint after a failed delivery is a
# command that sends the payload.  The receiver is tests/webhook_server.py;
# its /down/N/... paths answer 503 (Retry-After: 1) N times, then 200, so
# every attempt is counted in its log.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-python3}

coproc SERVER { exec "$PY" "$AB_SOURCE_DIR/tests/webhook_server.py" "$WORK/hooks.jsonl" --time-limit 300 --exit-on-stdin-eof; }
server_pid=$SERVER_PID
read -r -u "${SERVER[0]}" PORT || fail "webhook server did not start"
HOOK="http://127.0.0.1:$PORT"
trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$WORK"' EXIT
SPOOL="$XDG_STATE_HOME/autobatch/webhook-spool"
LEGACY="$XDG_CACHE_HOME/autobatch/webhook-spool"

# hits PATH: requests the receiver got for PATH
hits() { "$PY" -c 'import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["path"] == sys.argv[2]))' "$WORK/hooks.jsonl" "$1"; }
# bodies PATH: which results file each request for PATH carried, in order
# (A, B, C, or ? for a body that is none of them), e.g. "AAAAAA"
bodies() { "$PY" - "$WORK/hooks.jsonl" "$1" "$WORK/rA.json" "$WORK/rB.json" "$WORK/rC.json" <<'PYEOF'
import json, sys
log, path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
docs = [json.load(open(f)) for f in files]
out = ""
for l in open(log):
    r = json.loads(l)
    if r["path"] == path:
        b = json.loads(r["body"])
        out += next((n for n, d in zip("ABC", docs) if d == b), "?")
print(out)
PYEOF
}
# kept DIR: the paths of the URLs the payloads in DIR were kept for, sorted
kept() { "$PY" - "$1" <<'PYEOF'
import glob, json, os, sys, urllib.parse
urls = [json.load(open(f))["url"] for f in glob.glob(os.path.join(sys.argv[1], "*.json"))]
print(" ".join(sorted(urllib.parse.urlsplit(u).path for u in urls)))
PYEOF
}

# --- three results files (generic payloads are the files themselves)
for x in A:6G B:7G C:8G; do
  "$AUTOBATCH" --quiet --no-cache --batch 1:64 --json "$WORK/r${x%%:*}.json" \
    -- "$SIMTRAIN" --capacity "${x#*:}" >/dev/null 2>&1 || fail "run ${x%%:*}: exit $?"
done

# --- a webhook down for one series: 5 attempts, then kept for that URL
A=/down/5/a B=/down/5/b
rc=0; "$AUTOBATCH" notify "$WORK/rA.json" --webhook "$HOOK$A" >"$WORK/nA.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "notify RESULTS to a webhook that is down: exit status"
assert_eq 5 "$(hits $A)" "attempts against a webhook that is down (one series of retries)"
rc=0; "$AUTOBATCH" notify "$WORK/rB.json" --webhook "$HOOK$B" >"$WORK/nB.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "notify RESULTS B: exit status"
assert_eq 5 "$(hits $B)" "attempts against B"
assert_eq AAAAA "$(bodies $A)" "what A got"
assert_eq BBBBB "$(bodies $B)" "what B got (A's kept payload must not go to B)"
assert_eq "$A $B" "$(kept "$SPOOL")" "the URLs the kept payloads are for"
pass "a webhook that is down: one series of 5 attempts, then kept for its own URL (A and B)"

# --- the hint names a command that sends the kept payload
grep -q "not delivered" "$WORK/nA.out" || fail "no warning: $(cat "$WORK/nA.out")"
hint=$(sed -n "s/^autobatch: kept in '.*'; '\(autobatch [^']*\)' sends it later.*/\1/p" "$WORK/nA.out")
assert_eq "autobatch notify" "$hint" "the command the hint names"

# --- notify RESULTS --webhook B: RESULTS only, to B; the spool is untouched
"$AUTOBATCH" notify "$WORK/rC.json" --webhook "$HOOK$B" >"$WORK/nC.out" 2>&1 \
  || fail "notify rC to B: exit $? $(cat "$WORK/nC.out")"
assert_eq BBBBBC "$(bodies $B)" "B after notify rC --webhook B"
assert_eq AAAAA "$(bodies $A)" "A after notify rC --webhook B"
assert_eq "$A $B" "$(kept "$SPOOL")" "the spool after notify RESULTS"
pass "notify RESULTS --webhook B sends RESULTS only, to B; both kept payloads stay"

# --- notify --webhook A: only what was kept for A, to A
"$AUTOBATCH" notify --webhook "$HOOK$A" >"$WORK/fA.out" 2>&1 || fail "notify --webhook A: exit $? $(cat "$WORK/fA.out")"
grep -q "sent 1 kept" "$WORK/fA.out" || fail "notify --webhook A: $(cat "$WORK/fA.out")"
assert_eq AAAAAA "$(bodies $A)" "A after notify --webhook A"
assert_eq BBBBBC "$(bodies $B)" "B after notify --webhook A"
assert_eq "$B" "$(kept "$SPOOL")" "the spool after notify --webhook A"

# --- the hint's command alone: the rest, each to its own URL
"$AUTOBATCH" ${hint#autobatch } >"$WORK/f.out" 2>&1 || fail "$hint: exit $? $(cat "$WORK/f.out")"
assert_eq BBBBBCB "$(bodies $B)" "B after notify"
assert_eq AAAAAA "$(bodies $A)" "A after notify"
assert_eq "" "$(kept "$SPOOL")" "the spool after notify"
[ "$(wc -l <"$WORK/hooks.jsonl")" = 13 ] || fail "requests to other URLs: $(cat "$WORK/hooks.jsonl")"
pass "a flush sends each kept payload only to its own URL ('$hint', and --webhook URL for one URL)"

# --- a tuning run whose webhook is down: one series, kept, and its hint works
R=/down/5/run
"$AUTOBATCH" --quiet --no-cache --batch 1:64 --json "$WORK/rR.json" --webhook "$HOOK$R" \
  -- "$SIMTRAIN" --capacity 6G >/dev/null 2>"$WORK/run.err" || fail "a dead webhook changed the run's exit status: $?"
assert_eq 5 "$(hits $R)" "attempts by the run against a webhook that is down"
assert_eq "$R" "$(kept "$SPOOL")" "the spool after the run"
hint=$(sed -n "s/^autobatch: kept in '.*'; '\(autobatch [^']*\)' sends it later.*/\1/p" "$WORK/run.err")
assert_eq "autobatch notify" "$hint" "the run's hint: $(cat "$WORK/run.err")"
"$AUTOBATCH" ${hint#autobatch } >"$WORK/f.out" 2>&1 || fail "$hint after the run: exit $? $(cat "$WORK/f.out")"
assert_eq 6 "$(hits $R)" "requests to the run's webhook after '$hint'"
assert_eq "" "$(kept "$SPOOL")" "the spool after the run's hint"
pass "a run with a dead webhook: 5 attempts, kept, sent by '$hint'"

# --- one series per flush, across the spool and the old one under the cache
D=/down/15/both
for i in 1 2; do
  "$AUTOBATCH" notify "$WORK/rA.json" --webhook "$HOOK$D" >/dev/null 2>&1 && fail "notify $i to $D succeeded"
done
assert_eq 10 "$(hits $D)" "two notify RESULTS: two series"
mkdir -p "$LEGACY"
mv "$(ls "$SPOOL"/*.json | head -1)" "$LEGACY/"
rc=0; "$AUTOBATCH" notify >"$WORK/f.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "notify with its webhook still down: exit status"
assert_eq 15 "$(hits $D)" "attempts by one notify for two payloads kept for a webhook that is down"
grep -q "2 kept deliveries still not sent" "$WORK/f.out" || fail "notify: $(cat "$WORK/f.out")"
"$AUTOBATCH" notify >"$WORK/f.out" 2>&1 || fail "notify once it is up: exit $? $(cat "$WORK/f.out")"
assert_eq 17 "$(hits $D)" "requests once the webhook is up"
assert_eq "" "$(kept "$SPOOL")$(kept "$LEGACY")" "the spools after notify"
pass "a webhook that is down costs one series per flush, whatever the number of payloads and spools"
