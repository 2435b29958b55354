#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Results for people and CI: one tuning run with --webhook, --junit,
# --markdown and --html produces all of them; the HTML renders in headless
# Chromium with one mark per trial; a dead webhook does not fail the run
# and `autobatch notify` delivers it later; `autobatch report`, `matrix`
# and --baseline (exit 6) work on the results of two runs;
# GITHUB_STEP_SUMMARY gets the summary.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-python3}

# --- a webhook receiver on loopback
coproc SERVER { exec "$PY" "$AB_SOURCE_DIR/tests/webhook_server.py" "$WORK/hooks.jsonl" --time-limit 240 --exit-on-stdin-eof; }
server_pid=$SERVER_PID
read -r -u "${SERVER[0]}" PORT || fail "webhook server did not start"
HOOK="http://127.0.0.1:$PORT"
stop_server() { kill "$server_pid" 2>/dev/null || true; }
trap 'stop_server; rm -rf "$WORK"' EXIT

export AUTOBATCH_WEBHOOK_SECRET="s3cret-for-the-test"
export GITHUB_STEP_SUMMARY="$WORK/summary.md"
echo "# earlier step" > "$GITHUB_STEP_SUMMARY"

"$AUTOBATCH" --quiet --no-cache --batch 1:64 --json "$WORK/r1.json" --junit "$WORK/r1.xml" \
  --markdown "$WORK/r1.md" --html "$WORK/r1.html" --webhook "$HOOK/ok/run1" --webhook-format slack \
  -- "$SIMTRAIN" --capacity 8G >"$WORK/r1.out" 2>"$WORK/r1.err" || fail "run 1: exit $?"
for f in r1.json r1.xml r1.md r1.html; do [ -s "$WORK/$f" ] || fail "run 1: $f missing"; done
trials=$(jqr '.summary.trials' "$WORK/r1.json")

# JUnit: well-formed, one testcase per trial, OOMs skipped
"$PY" - "$WORK/r1.xml" "$trials" "$(jqr '[.trials[] | select(.outcome == "oom")] | length' "$WORK/r1.json")" <<'PYEOF' || fail "junit"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
skipped = [c for c in cases if c.find("skipped") is not None]
assert len(cases) == int(sys.argv[2]), (len(cases), sys.argv[2])
assert len(skipped) == int(sys.argv[3]), (len(skipped), sys.argv[3])
assert root.get("tests") == sys.argv[2]
PYEOF
grep -q "micro-batch" "$WORK/r1.md" || fail "markdown has no table"

# HTML: self-contained, one mark per trial, renders to a non-blank PNG
[ "$(grep -o 'class="trial"' "$WORK/r1.html" | wc -l)" = "$trials" ] || fail "html: marks != trials"
if grep -Eq '<script[^>]*src=|<link ' "$WORK/r1.html"; then fail "html loads something from outside"; fi
command -v chromium >/dev/null || fail "chromium is missing: apt-get install chromium"
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=900,1400 \
  --screenshot="$WORK/r1.png" "file://$WORK/r1.html" >/dev/null 2>&1 || true
[ -s "$WORK/r1.png" ] || fail "chromium wrote no screenshot"
"$PY" - "$WORK/r1.png" <<'PYEOF' || fail "the screenshot is blank or too small"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", data[16:24])
assert w >= 800 and h >= 1000, (w, h)
idat, i = b"", 8
while i < len(data):
    n = struct.unpack(">I", data[i:i + 4])[0]
    if data[i + 4:i + 8] == b"IDAT":
        idat += data[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
# many distinct byte values and not all white: something was drawn
assert len(set(raw)) > 32, len(set(raw))
assert raw.count(255) < 0.97 * len(raw)
PYEOF
pass "reports: json, junit ($trials testcases), markdown, html rendered by chromium"

# --- how to use the choice and the capacity line; the page uses a wide window
best=$(jqr '.best.micro_batch' "$WORK/r1.json")
jqr '.run_with.command | join(" ")' "$WORK/r1.json" | grep -q -- "--capacity 8G --per_device_train_batch_size $best" \
  || fail "results: run_with.command lacks the choice: $(jqr '.run_with' "$WORK/r1.json")"
grep -q "^<h2>Run with</h2>" "$WORK/r1.html" || fail "html: no Run with section"
grep -q -- "--per_device_train_batch_size $best --gradient_accumulation_steps 1</pre>" "$WORK/r1.html" \
  || fail "html: the command with the choice is missing"
# no GPU, but simtrain's OOM messages say the device's total: the capacity the search learnt
assert_eq "oom-message 8589934592" "$(jqr '"\(.capacity.source) \(.capacity.bytes)"' "$WORK/r1.json")" "capacity in the results"
grep -q "^<tr><th>Capacity</th><td>no GPU: 8.0 GiB (from the OOM messages); headroom 0%" "$WORK/r1.html" || fail "html: no capacity line"
grep -q "^- \*\*Capacity:\*\* " "$WORK/r1.md" || fail "markdown: no capacity line"
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,900 \
  --screenshot="$WORK/wide.png" "file://$WORK/r1.html" >/dev/null 2>&1 || true
[ -s "$WORK/wide.png" ] || fail "chromium wrote no wide screenshot"
"$PY" - "$WORK/wide.png" <<'PYEOF' || fail "html: the page does not use a 1600 px window"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
w, h, depth, ctype = struct.unpack(">IIBB", data[16:26])
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 4 if ctype == 6 else 3
idat, i = b"", 8
while i < len(data):
    n = struct.unpack(">I", data[i:i + 4])[0]
    if data[i + 4:i + 8] == b"IDAT":
        idat += data[i + 8:i + 8 + n]
    i += 12 + n
raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        p = a + b - c
        pr = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
        line[x] = (line[x] + (0, a, b, (a + b) // 2, pr)[f]) & 255
    rows.append(line)
    prev = line
# ink right of x=1000 (an 800 px column leaves it white): the second chart
ink = sum(1 for r in rows for x in range(1000, w - 20) if min(r[x * bpp:x * bpp + 3]) < 160)
assert ink > 2000, ink
PYEOF
pass "reports: run_with in the results, Run with and capacity in html and markdown, a wide page"

# --- the reports agree with the terminal (issue 28): the capacity learnt
# from the OOM messages and what --headroom excluded, a pruned cell said to
# be pruned, failed sizes and the memory chart in the HTML, the warm start
# and the settings everywhere
run_b() {
  "$AUTOBATCH" --batch 1:512 --checkpointing both --headroom 10 --json "$WORK/$1.json" \
    --markdown "$WORK/$1.md" --html "$WORK/$1.html" --junit "$WORK/$1.xml" \
    -- "$SIMTRAIN" --capacity 24G --report --ckpt-slowdown 3 >"$WORK/$1.err" 2>&1 || fail "$1: exit $?"
}
run_b b1
said=$(sed -n 's/.*--headroom 10% excluded \([0-9]*\) fitting configuration.*/\1/p' "$WORK/b1.err")
[ -n "$said" ] || fail "b1: the terminal did not say what --headroom excluded: $(tail -5 "$WORK/b1.err")"
assert_eq "oom-message 25769803776 $said" "$(jqr '"\(.capacity.source) \(.capacity.bytes) \(.capacity.excluded)"' "$WORK/b1.json")" \
  "results: capacity, source and exclusions as the terminal said"
grep -q "^- \*\*Capacity:\*\* no GPU: 24.0 GiB (from the OOM messages); headroom 10%: fits may peak at up to 21.6 GiB; it excluded $said fitting configuration" "$WORK/b1.md" \
  || fail "markdown: the capacity line disagrees with the terminal: $(grep Capacity "$WORK/b1.md")"
grep -q '<property name="capacity_source" value="oom-message"/>' "$WORK/b1.xml" || fail "junit: no capacity_source property"
grep -q '<property name="settings" value="5 measured steps after 2 warm-up;' "$WORK/b1.xml" || fail "junit: no settings property"
grep -q "^- \*\*Warm start:\*\* not used: nothing cached" "$WORK/b1.md" || fail "markdown: warm start of a first run"
grep -q "^- \*\*Settings:\*\* 5 measured steps after 2 warm-up; confirm the choice: 20 steps or 60.0 s;" "$WORK/b1.md" \
  || fail "markdown: no settings line"
[ "$(jqr '[.max_fit[] | select(.bounded_by == "pruned")] | length' "$WORK/b1.json")" = 1 ] \
  || fail "b1: no pruned cell to check (the search changed?): $(jqr '.max_fit' "$WORK/b1.json")"
grep -q '^| 1 | on | ≥ [0-9]* | — | [0-9]* | pruned: could not beat the fastest fit' "$WORK/b1.md" \
  || fail "markdown: the pruned cell is not said to be pruned: $(grep '^| 1 | on' "$WORK/b1.md")"
if grep -q 'top of the range' "$WORK/b1.md" "$WORK/b1.html"; then fail "a pruned cell is called the top of the range"; fi
grep -q '<g class="cell pruned">' "$WORK/b1.html" || fail "html: the pruned bar is not marked"
fails=$(jqr '[.trials[] | select(.outcome == "oom")] | length' "$WORK/b1.json")
[ "$fails" -gt 0 ] || fail "b1: no failed size"
# each failed size: a cross in the throughput chart and one in the memory chart
assert_eq $((2 * fails)) "$(grep -o 'class="failed"' "$WORK/b1.html" | wc -l)" "html: failed-size markers"
grep -q '<svg id="memory"' "$WORK/b1.html" || fail "html: no memory chart though memory was measured"
assert_eq "$(jqr '[.trials[] | select(.outcome == "fit" and .peak_mem_bytes != null)] | length' "$WORK/b1.json")" \
  "$(grep -o 'class="mem"' "$WORK/b1.html" | wc -l)" "html: one memory mark per measured fit"
assert_eq 2 "$(grep -o 'class="capacity"' "$WORK/b1.html" | wc -l)" "html: the capacity line in both charts"
assert_eq 2 "$(grep -o 'class="model"' "$WORK/b1.html" | wc -l)" "html: each cell's memory line"
run_b b2
key=$(jqr '.warm_start.cache_key' "$WORK/b2.json")
assert_eq "true" "$(jqr '.warm_start.used' "$WORK/b2.json")" "the second run starts warm"
grep -q "^- \*\*Warm start:\*\* used: the search started from the boundaries cached by an earlier run (2 cells), cache entry $key" \
  "$WORK/b2.md" || fail "markdown: the warm start is not shown: $(grep 'Warm start' "$WORK/b2.md")"
grep -q "<property name=\"warm_start\" value=\"used: " "$WORK/b2.xml" || fail "junit: no warm_start property"
pass "reports agree with the terminal: capacity from OOM messages, --headroom exclusions, pruned cell, failed sizes, memory chart, warm start, settings"

# --- --trial-memory-limit with messages that carry no figures: the limit is the capacity, unchecked.
# The trainer is a few lines of Python that really allocate 48 MiB a sample
# (simtrain built with ASan cannot start under an address-space cap: its
# shadow memory alone is terabytes); Python's MemoryError carries no figure.
cat >"$WORK/cap_trainer.py" <<'PYEOF'
import sys
a = sys.argv
b = int(a[a.index("--per_device_train_batch_size") + 1])
n = int(a[a.index("--max_steps") + 1]) if "--max_steps" in a else 100
for i in range(1, n + 1):
    x = bytearray(b * 48 * 2**20)
    del x
    print("%d/%d [00:00<00:00, 50.00it/s]" % (i, n), flush=True)
PYEOF
"$AUTOBATCH" --quiet --no-cache --no-probe --batch 1:64 --trial-memory-limit 2G --headroom 10 --json "$WORK/m.json" \
  --markdown "$WORK/m.md" -- "$PY" "$WORK/cap_trainer.py" >"$WORK/m.err" 2>&1 || fail "m: exit $? ($(tail -3 "$WORK/m.err"))"
grep -q "headroom could not be checked" "$WORK/m.err" || fail "m: the terminal did not warn of an unchecked headroom"
assert_eq "trial-memory-limit 2147483648 false" \
  "$(jqr '"\(.capacity.source) \(.capacity.bytes) \(.capacity.headroom_checked)"' "$WORK/m.json")" "results: capacity from --trial-memory-limit"
grep -q "^- \*\*Capacity:\*\* no GPU: 2.0 GiB (--trial-memory-limit); headroom 10%: fits may peak at up to 1.8 GiB; not checked" \
  "$WORK/m.md" || fail "markdown: no capacity from --trial-memory-limit: $(grep Capacity "$WORK/m.md")"
pass "--trial-memory-limit: the capacity and an unchecked headroom in the results and the report"

# --- the webhook got the Slack payload, signed and with a delivery id
"$PY" - "$WORK/hooks.jsonl" "$AUTOBATCH_WEBHOOK_SECRET" <<'PYEOF' || fail "webhook delivery"
import hashlib, hmac, json, re, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
r = [x for x in reqs if x["path"] == "/ok/run1"]
assert len(r) == 1, reqs
h, body = r[0]["headers"], r[0]["body"]
want = "sha256=" + hmac.new(sys.argv[2].encode(), body.encode(), hashlib.sha256).hexdigest()
assert h["x-autobatch-signature-256"] == want
assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", h["x-autobatch-delivery"])
p = json.loads(body)
assert "text" in p and "blocks" in p
PYEOF
if grep -rq "$AUTOBATCH_WEBHOOK_SECRET" "$WORK/r1.out" "$WORK/r1.err" "$WORK/r1.json" "$WORK/r1.md"; then
  fail "the secret was printed or written"
fi
pass "webhook: slack payload, HMAC signature and delivery id checked"

# --- GITHUB_STEP_SUMMARY: appended after what was there
head -1 "$GITHUB_STEP_SUMMARY" | grep -q "earlier step" || fail "step summary overwritten"
[ "$(wc -l < "$GITHUB_STEP_SUMMARY")" -gt 5 ] || fail "step summary not appended"
pass "GITHUB_STEP_SUMMARY appended"

# --- a dead webhook: the run still succeeds, the payload is spooled; it
# is sent to its own URL (down for the run's 5 attempts, then back)
"$AUTOBATCH" --quiet --no-cache --batch 1:64 --json "$WORK/r2.json" --webhook "$HOOK/down/5/later" \
  -- "$SIMTRAIN" --capacity 6G >/dev/null 2>"$WORK/r2.err" || fail "dead webhook changed the exit status: $?"
grep -q "not delivered" "$WORK/r2.err" || fail "no warning about the dead webhook"
ls "$XDG_STATE_HOME/autobatch/webhook-spool/"*.json >/dev/null 2>&1 || fail "nothing spooled"
"$AUTOBATCH" notify >"$WORK/n.out" 2>&1 || fail "notify: exit $? $(cat "$WORK/n.out")"
[ -z "$(ls "$XDG_STATE_HOME/autobatch/webhook-spool/" 2>/dev/null)" ] || fail "spool not emptied"
[ "$(grep -c '"/down/5/later"' "$WORK/hooks.jsonl")" = 6 ] || fail "the spooled payload never arrived"
"$AUTOBATCH" notify "$WORK/r2.json" --webhook "$HOOK/ok/again" --webhook-format discord >/dev/null 2>&1 \
  || fail "notify RESULTS: exit $?"
grep -q '"/ok/again"' "$WORK/hooks.jsonl" || fail "notify RESULTS did not deliver"
pass "dead webhook: run exit 0, spooled, delivered by autobatch notify"

# --- a payload kept where versions before 0.1.0 spooled (the cache) is sent too
"$AUTOBATCH" --quiet --no-cache --batch 1:64 --webhook "$HOOK/down/5/legacy" \
  -- "$SIMTRAIN" --capacity 6G >/dev/null 2>&1 || fail "dead webhook (legacy): exit $?"
mkdir -p "$XDG_CACHE_HOME/autobatch/webhook-spool"
mv "$XDG_STATE_HOME/autobatch/webhook-spool/"*.json "$XDG_CACHE_HOME/autobatch/webhook-spool/"
"$AUTOBATCH" notify >"$WORK/n.out" 2>&1 || fail "notify (legacy): exit $? $(cat "$WORK/n.out")"
[ "$(grep -c '"/down/5/legacy"' "$WORK/hooks.jsonl")" = 6 ] || fail "the payload in the old spool never arrived"
[ -z "$(ls "$XDG_CACHE_HOME/autobatch/webhook-spool/")" ] || fail "old spool not emptied"
pass "old spool under the cache directory: sent and emptied by autobatch notify"

# --- report, matrix and the baseline gate on two runs
"$AUTOBATCH" report "$WORK/r1.json" --format html -o "$WORK/again.html" || fail "report html"
[ "$(grep -o 'class="trial"' "$WORK/again.html" | wc -l)" = "$trials" ] || fail "report: marks"
"$AUTOBATCH" report "$WORK/r1.json" >"$WORK/again.md" || fail "report markdown"
cmp -s "$WORK/again.md" "$WORK/r1.md" || fail "report markdown differs from --markdown"
"$AUTOBATCH" matrix "$WORK/r1.json" "$WORK/r2.json" -o "$WORK/matrix.md" || fail "matrix"
[ "$(grep -c '^| no GPU' "$WORK/matrix.md")" = 2 ] || fail "matrix: not one row per file"
"$AUTOBATCH" matrix "$WORK/r1.json" "$WORK/r2.json" --format json | jq -e . >/dev/null || fail "matrix json"
set +e
"$AUTOBATCH" --quiet --no-cache --batch 1:64 --baseline "$WORK/r1.json" --json "$WORK/r3.json" \
  --markdown "$WORK/r3.md" -- "$SIMTRAIN" --capacity 8G --sample-time 2ms >/dev/null 2>"$WORK/r3.err"
rc=$?
set -e
assert_eq 6 "$rc" "a slower run against the baseline"
assert_eq true "$(jqr '.baseline.regression' "$WORK/r3.json")" "baseline.regression"
grep -q "REGRESSION" "$WORK/r3.err" || fail "the regression is not said"
grep -qi "regression" "$WORK/r3.md" || fail "the markdown report does not show the regression"
"$AUTOBATCH" --quiet --no-cache --batch 1:64 --baseline "$WORK/r1.json" --regression-threshold 99 \
  --json "$WORK/r4.json" -- "$SIMTRAIN" --capacity 8G --sample-time 2ms >/dev/null 2>&1 \
  || fail "threshold 99%: exit $?"
pass "report, matrix, baseline gate (exit 6)"
stop_server
wait "$server_pid" 2>/dev/null || true
assert_no_leftovers
