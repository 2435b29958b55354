#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The table of bench/real_anchors.sh, from its logs only.

    python3 report.py RUNS.TSV --steps N [--trials]

RUNS.TSV has one line per tool and job, written by the bench:
  job  tool  program  cap_kb  autobatch  LOG  RESULTS.json  B=LOG B=LOG...
  job  tool  program  cap_kb  lightning  LOG
  job  tool  program  cap_kb  hf         LOG
Every LOG is bench/real_anchors/tsrun.py's: "SECONDS<TAB>LINE", the last
line "#exit<TAB>STATUS<TAB>SECONDS".  A value that was not measured is
printed as "-".  --trials prints every tool's trials in run order instead
of the table.  Standard library only.

How each column is counted:
  trials   autobatch: its trials (the results file's, throughput ones
           included).  lightning: the fit loops scale_batch_size ran (one per
           size; a loop that ended before its 3 steps was caught as OOM).
           hf: the runs of the Trainer's inner training loop (one per size;
           every one but the last ended in an OOM that accelerate caught).
  wall s   from the tool's start (the Python or autobatch process, start-up
           included) until it had its answer: autobatch's whole run;
           lightning: scale_batch_size returned; hf: the third optimizer step
           of the size it settled on ended (as many steps as a 3-step trial).
  answer   the batch the tool trains with.  autobatch: its choice (the
           fastest measured fit), with its largest fit when that differs;
           lightning: after its 5% margin, with the size it ended its search
           on; hf: the size whose run did not fail.
  survives N steps at the answer under the same cap: autobatch, a fresh run
           of the job at its choice (and at its largest fit); lightning,
           trainer.fit in the tuning process, as the docs use it; hf, the
           Trainer's own run after its search, in the same process.
"""
import argparse
import json
import re
import sys

OOM_RE = re.compile(r"DefaultCPUAllocator: can't allocate memory|MemoryError|std::bad_alloc|out of memory")
LOSS_RE = re.compile(r"\{'loss': ")
HF_ATTEMPT_RE = re.compile(r"Total train batch size \(w\. parallel, distributed & accumulation\) = ([\d,]+)")
MARGIN_RE = re.compile(r"reducing batch size from (\d+) to (\d+)")


def read_log(path):
    """([(t, text)], exit status, elapsed) of a tsrun.py log."""
    lines, status, elapsed = [], None, None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for raw in f:
                raw = raw.rstrip("\n")
                if raw.startswith("#exit\t"):
                    _, st, el = raw.split("\t")
                    status, elapsed = int(st), float(el)
                    continue
                t, _, text = raw.partition("\t")
                try:
                    lines.append((float(t), text))
                except ValueError:
                    pass
    except OSError:
        pass
    return lines, status, elapsed


def last_error(lines):
    for _, text in reversed(lines):
        if re.search(r"Error|error:|Killed|Traceback", text):
            return text.strip()[:160]
    return None


def fmt_s(v):
    return "-" if v is None else "%.0f" % v


def rate(times, size):
    """samples/s over steps 2..N of a run (the first step is warm-up), from
    the times its per-step lines arrived; None with fewer than 3 steps."""
    if size is None or len(times) < 3 or times[-1] <= times[0]:
        return None
    return size * (len(times) - 1) / (times[-1] - times[0])


def fmt_rate(v):
    return "-" if v is None else "%.1f" % v


def survival_verdict(n_steps, status, lines, want, where=""):
    if status is None:
        return "not run"
    if status == 0 and n_steps >= want:
        return "yes" + where
    oom = any(OOM_RE.search(t) for _, t in lines)
    if oom:
        return "NO: OOM after %d steps%s" % (n_steps, where)
    return "NO: exit %d after %d steps%s (%s)" % (status, n_steps, where, last_error(lines) or "?")


def autobatch_row(f, want):
    lines, status, elapsed = read_log(f[5])
    try:
        with open(f[6]) as fh:
            r = json.load(fh)
    except (OSError, ValueError, IndexError):
        r = None
    trials, seq = [], []
    for tr in (r or {}).get("trials", []):
        mark = "" if tr.get("outcome") == "fit" else ("x" if tr.get("outcome") == "oom" else "!" + str(tr.get("outcome")))
        seq.append("%s%s" % (tr.get("micro_batch"), mark))
        sps = tr.get("samples_per_s")
        trials.append("%s:%s(%.1fs%s)" % (tr.get("micro_batch"), tr.get("outcome"), tr.get("wall_s") or 0,
                                          ", %.1f samples/s" % sps if sps else ""))
    best = ((r or {}).get("best") or {}).get("micro_batch")
    largest = (((r or {}).get("max_fit") or [{}])[0] or {}).get("micro_batch")
    answer = "-" if best is None else str(best)
    if largest is not None and largest != best:
        answer += " (largest fit %s)" % largest
    # when it had its boundary: a fit at the largest fit L and a failure at
    # L+step (or a fit at the top of --batch), from its own trial lines
    to_bound = n_bound = None
    if r is not None and largest is not None:
        step = r["space"]["batch"]["step"]
        need_fail = largest + step <= r["space"]["batch"]["max"]
        fit = fail = False
        n = 0
        ends = [t for t, text in lines if re.search(r"^autobatch: trial \d+: .* -> ", text)]
        for i, tr in enumerate(r.get("trials", [])):
            n += 1
            fit = fit or (tr.get("micro_batch") == largest and tr.get("outcome") == "fit")
            fail = fail or (tr.get("micro_batch") == largest + step and tr.get("outcome") != "fit")
            if fit and (fail or not need_fail):
                n_bound = n
                to_bound = ends[i] if i < len(ends) else None
                break
    surv, run_s, rates = [], [], []
    for item in (f[7].split() if len(f) > 7 else []):
        b, _, log = item.partition("=")
        sl, st, el = read_log(log)
        times = [t for t, text in sl if LOSS_RE.search(text)]
        surv.append("%s: %s" % (b, survival_verdict(len(times), st, sl, want)))
        run_s.append(fmt_s(el))
        rates.append("%s: %s" % (b, fmt_rate(rate(times, int(b)))))
    if r is None:
        note = last_error(lines) or "no results file"
        return dict(trials="-", seq=note, wall="-", answer="-", survives="-", run="-", rate="-"), trials
    return dict(trials="%d (%s)" % (len(seq), "-" if n_bound is None else n_bound), seq=" ".join(seq),
                wall="%s (%s)" % (fmt_s(elapsed), fmt_s(to_bound)), answer=answer,
                survives="; ".join(surv) or "-", run="/".join(run_s) or "-", rate="; ".join(rates) or "-"), trials


def lightning_row(f, want):
    lines, status, elapsed = read_log(f[5])
    tune, fit, tuned, tuned_t, err = [], None, None, None, None
    cur = None
    for t, text in lines:
        if not text.startswith("ANCHOR "):
            continue
        try:
            ev = json.loads(text[7:])
        except ValueError:
            continue
        if ev["ev"] == "trial":
            cur = dict(size=ev["size"], steps=0, t=t, phase=ev["phase"])
            (tune.append(cur) if ev["phase"] == "tune" else None)
            if ev["phase"] == "fit":
                fit = cur
        elif ev["ev"] == "step" and cur is not None:
            cur["steps"] = ev["n"]
            cur.setdefault("times", []).append(t)
        elif ev["ev"] == "tuned":
            tuned, tuned_t = ev["size"], t
        elif ev["ev"] == "error":
            err = ev
    found = None
    for _, text in lines:
        m = MARGIN_RE.search(text)
        if m:
            found = int(m.group(1))
    seq, trials = [], []
    for i, tr in enumerate(tune):
        ok = tr["steps"] >= 3
        last_failed = err is not None and err.get("phase") == "tune" and i == len(tune) - 1
        mark = "" if ok else ("x" if not last_failed or err.get("oom") else "!")
        if not ok and tr["steps"]:
            mark += "@%d" % tr["steps"]
        seq.append("%d%s" % (tr["size"], mark))
        trials.append("%d:%s(%d steps, from %.1fs)" % (tr["size"], "fit" if ok else "oom", tr["steps"], tr["t"]))
    if tuned is None:
        why = (err or {}).get("msg") or last_error(lines) or "no answer"
        return dict(trials=str(len(seq)), seq=" ".join(seq) + "  (ended: %s)" % why[:100], wall="-",
                    answer="-", survives="-", run=fmt_s(elapsed), rate="-"), trials
    answer = str(tuned) + (" (search ended on %d)" % found if found and found != tuned else "")
    n = fit["steps"] if fit else 0
    surv = survival_verdict(n, status, lines, want, ", in-process")
    if fit:
        trials.append("then trainer.fit at %d: %d steps (from %.1fs)" % (fit["size"], n, fit["t"]))
    fit_rate = rate(fit.get("times", []), fit["size"]) if fit else None
    return dict(trials=str(len(seq)), seq=" ".join(seq), wall=fmt_s(tuned_t), answer=answer,
                survives=surv, run=fmt_s(elapsed), rate=fmt_rate(fit_rate)), trials


def hf_row(f, want):
    lines, status, elapsed = read_log(f[5])
    attempts = []
    for t, text in lines:
        m = HF_ATTEMPT_RE.search(text)
        if m:
            attempts.append(dict(size=int(m.group(1).replace(",", "")), t=t, losses=[]))
        elif attempts and LOSS_RE.search(text):
            attempts[-1]["losses"].append(t)
    seq, trials = [], []
    for i, a in enumerate(attempts):
        last = i == len(attempts) - 1
        ok = last and status == 0
        mark = "" if ok else "x"
        if not ok and a["losses"]:
            mark += "@%d" % len(a["losses"])
        seq.append("%d%s" % (a["size"], mark))
        trials.append("%d:%s(%d steps, from %.1fs)" % (a["size"], "ran" if ok else "failed", len(a["losses"]), a["t"]))
    if not attempts:
        return dict(trials="0", seq="(%s)" % (last_error(lines) or "no attempt logged"), wall="-", answer="-",
                    survives="-", run=fmt_s(elapsed), rate="-"), trials
    fin = attempts[-1]
    wall = fin["losses"][2] if status == 0 and len(fin["losses"]) >= 3 else None
    answer = str(fin["size"]) if status == 0 else "-"
    surv = survival_verdict(len(fin["losses"]), status, lines, want, ", in-process")
    return dict(trials=str(len(seq)), seq=" ".join(seq), wall=fmt_s(wall), answer=answer, survives=surv,
                run=fmt_s(elapsed), rate=fmt_rate(rate(fin["losses"], fin["size"]) if status == 0 else None)), trials


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--trials", action="store_true")
    a = p.parse_args()
    rows, detail = [], []
    with open(a.runs) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if len(f) < 6:
                continue
            kind = f[4]
            fn = {"autobatch": autobatch_row, "lightning": lightning_row, "hf": hf_row}[kind]
            row, trials = fn(f, a.steps)
            row.update(job=f[0], tool=f[1], program=f[2], cap="%.0f" % (int(f[3]) / 1024))
            rows.append(row)
            detail.append((f[0], f[1], trials))
    if a.trials:
        for job, tool, trials in detail:
            print("  %-8s %-10s %s" % (job, tool, " ".join(trials)))
        return
    cols = [("job", "job"), ("tool", "tool"), ("program", "program"), ("cap MiB", "cap"), ("trials", "trials"),
            ("sizes tried, in order", "seq"), ("wall s", "wall"), ("answer", "answer"),
            ("survives %d steps" % a.steps, "survives"), ("run s", "run"), ("run samples/s", "rate")]
    w = [max(len(h), *(len(str(r[k])) for r in rows)) if rows else len(h) for h, k in cols]
    print("  ".join(h.ljust(w[i]) for i, (h, _) in enumerate(cols)).rstrip())
    print("  ".join("-" * n for n in w))
    for r in rows:
        print("  ".join(str(r[k]).ljust(w[i]) for i, (_, k) in enumerate(cols)).rstrip())
    print("""
trials: autobatch's in parentheses: those it ran until it held its largest
fit L and a failure at L+1 (the boundary); the rest measure throughput.
sizes tried: x = out of memory (caught by the tool, or the trial ended by
it), x@k = after k optimizer steps, !why = another ending.
wall s: from the tool's start (start-up included) to its answer: autobatch's
whole run (in parentheses: until it held the boundary); lightning until
scale_batch_size returned; hf until the third step at the size it settled
on. survives, run s, run samples/s: the %d-step run at the answer (autobatch:
a fresh run of the job at each size named; lightning and hf: the training in
the tuning process that follows the search, its whole process in run s);
samples/s over its steps 2-%d. The caps: see the notes.
lightning: Tuner.scale_batch_size(mode="binsearch") at its defaults (init_val
2, steps_per_trial 3, margin 0.05). hf: auto_find_batch_size=True from
per_device_train_batch_size = the top of autobatch's --batch range.""" % (a.steps, a.steps))


if __name__ == "__main__":
    main()
