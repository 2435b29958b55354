#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The tables of bench/real_anchors.sh, from its logs only.

    python3 report.py RUNS.TSV --steps N [--startup STARTUP.TSV]   the summary
    python3 report.py RUNS.TSV --steps N --runs                    every run
    python3 report.py RUNS.TSV --steps N --trials                  every trial

RUNS.TSV has one line per run, written by the bench:
  job tool program cap_kb kind LOG RESULTS.json B=LOG... rep target range
(RESULTS.json and the B=LOG survival logs only for autobatch; empty fields
otherwise).  Every LOG is bench/real_anchors/tsrun.py's: "SECONDS<TAB>LINE",
the last line "#exit<TAB>STATUS<TAB>SECONDS".  STARTUP.TSV: "job program
seconds" from the calibration runs.  A value that was not measured is
printed as "-".  Standard library only.

How each run is counted:
  trials   autobatch: its trials (the results file's, throughput ones
           included).  lightning: the fit loops scale_batch_size ran (one per
           size; a loop that ended before its 3 steps was caught as OOM).
           hf: the runs of the Trainer's inner training loop (one per size;
           every one but the last ended in an OOM that accelerate caught).
  start-ups  processes started: autobatch, one per trial and per
           confirmation run; lightning and hf, 1.
  boundary  the largest fit the search ended on: autobatch's largest fit;
           lightning's size before its 5% margin; hf's size that ran.
  to boundary s  from the tool's start (start-up included): autobatch, until
           the trial (or confirmation run) that gave it a fit at its largest
           fit L and a failure at L+step (or a fit at the top of --batch) ended; lightning, until
           scale_batch_size returned; hf, until the third optimizer step of
           the size it settled on.
  whole s  autobatch's whole run (throughput points and confirmation run
           included); lightning and hf: as "to boundary" (the search is all
           they do before training).
  answer   the batch the tool trains with.  autobatch: its choice (the
           fastest measured fit), with its largest fit when that differs;
           lightning: after its 5% margin; hf: the size whose run did not fail.
  survives N steps at the answer under the same cap (BENCH_STEPS > 0):
           autobatch, a fresh run of the job at its choice (and at its
           largest fit); lightning and hf, the training in the tuning process.
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
    # L+step (or a fit at the top of --batch), from its own trial lines; the
    # confirmation runs count too (they are trials with their own ids, and
    # one that fails at L+1 is what settles the boundary)
    to_bound = n_bound = None
    if r is not None and largest is not None:
        step = r["space"]["batch"]["step"]
        need_fail = largest + step <= r["space"]["batch"]["max"]
        fit = fail = False
        n = 0
        ends = {}
        for t, text in lines:
            m = re.search(r"^autobatch: trial (\d+): .* -> ", text)
            if m:
                ends[int(m.group(1))] = t
        runs = sorted(list(r.get("trials", [])) + list(r.get("confirm") or []), key=lambda x: x.get("id", 0))
        for tr in runs:
            n += 1
            fit = fit or (tr.get("micro_batch") == largest and tr.get("outcome") == "fit")
            fail = fail or (tr.get("micro_batch") == largest + step and tr.get("outcome") != "fit")
            if fit and (fail or not need_fail):
                n_bound = n
                to_bound = ends.get(tr.get("id"))
                break
    surv, run_s, rates = [], [], []
    for item in (f[7].split() if len(f) > 7 and "=" in f[7] else []):
        b, _, log = item.partition("=")
        sl, st, el = read_log(log)
        times = [t for t, text in sl if LOSS_RE.search(text)]
        surv.append("%s: %s" % (b, survival_verdict(len(times), st, sl, want)))
        run_s.append(fmt_s(el))
        rates.append("%s: %s" % (b, fmt_rate(rate(times, int(b)))))
    if r is None:
        note = last_error(lines) or "no results file"
        return dict(trials="-", seq=note, wall="-", answer="-", survives="-", run="-", rate="-",
                    m=dict(whole=elapsed)), trials
    confirms = len(r.get("confirm") or [])
    m = dict(trials=len(seq), startups=len(seq) + confirms, bound=to_bound, whole=elapsed, found=largest,
             answer=best, first=(r.get("trials") or [{}])[0].get("micro_batch"), n_bound=n_bound)
    return dict(trials="%d (%s)" % (len(seq), "-" if n_bound is None else n_bound), seq=" ".join(seq),
                wall="%s (%s)" % (fmt_s(elapsed), fmt_s(to_bound)), answer=answer,
                survives="; ".join(surv) or "-", run="/".join(run_s) or "-", rate="; ".join(rates) or "-",
                m=m), trials


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
                    answer="-", survives="-", run=fmt_s(elapsed), rate="-",
                    m=dict(trials=len(seq), startups=1, whole=None)), trials
    answer = str(tuned) + (" (search ended on %d)" % found if found and found != tuned else "")
    n = fit["steps"] if fit else 0
    surv = survival_verdict(n, status, lines, want, ", in-process") if want > 0 else "-"
    if fit:
        trials.append("then trainer.fit at %d: %d steps (from %.1fs)" % (fit["size"], n, fit["t"]))
    fit_rate = rate(fit.get("times", []), fit["size"]) if fit else None
    m = dict(trials=len(seq), startups=1, bound=tuned_t, whole=tuned_t, found=found or tuned, answer=tuned,
             first=tune[0]["size"] if tune else None)
    return dict(trials=str(len(seq)), seq=" ".join(seq), wall=fmt_s(tuned_t), answer=answer,
                survives=surv, run=fmt_s(elapsed), rate=fmt_rate(fit_rate), m=m), trials


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
                    survives="-", run=fmt_s(elapsed), rate="-", m=dict(trials=0, startups=1, whole=None)), trials
    fin = attempts[-1]
    wall = fin["losses"][2] if status == 0 and len(fin["losses"]) >= 3 else None
    answer = str(fin["size"]) if status == 0 else "-"
    surv = survival_verdict(len(fin["losses"]), status, lines, want, ", in-process")
    m = dict(trials=len(seq), startups=1, bound=wall, whole=wall, found=fin["size"] if status == 0 else None,
             answer=fin["size"] if status == 0 else None, first=attempts[0]["size"])
    return dict(trials=str(len(seq)), seq=" ".join(seq), wall=fmt_s(wall), answer=answer, survives=surv,
                run=fmt_s(elapsed), rate=fmt_rate(rate(fin["losses"], fin["size"]) if status == 0 else None),
                m=m), trials


def med(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def mn(xs):
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None


def ratio(a, b):
    return "-" if a is None or not b else "%.2fx" % (a / b)


def startup_s(path):
    """{job: S}: the median of the job's own program's calibration start-ups
    (the program autobatch runs; the first line of each job's programs)."""
    got = {}
    try:
        with open(path) as fh:
            for line in fh:
                f = line.rstrip("\n").split("\t")
                if len(f) == 3 and f[2]:
                    got.setdefault((f[0], f[1]), []).append(float(f[2]))
    except OSError:
        pass
    out, detail = {}, []
    for (job, prog), xs in got.items():
        detail.append("%s %s %s s" % (job, prog, "/".join("%.1f" % x for x in xs)))
        if prog in ("train_tts.py", "train.py"):
            out[job] = med(xs)
    return out, detail


def summary(rows, steps, startups):
    S, detail = startups
    tools = list(dict.fromkeys(r["tool"] for r in rows))
    print("| job | boundary (cap MiB) | tool | runs | first size | boundary found | trials | start-ups | "
          "start-ups x S s | to boundary s, min / median | whole s, min / median | "
          "vs Lightning, to boundary / whole (medians) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {}
    for job in dict.fromkeys(r["job"] for r in rows):
        targets = list(dict.fromkeys(r["target"] for r in rows if r["job"] == job))
        for t in sorted(targets, key=int):
            meds = {}
            for tool in tools:
                rs = [r for r in rows if r["job"] == job and r["target"] == t and r["tool"] == tool]
                if not rs:
                    continue
                ms = [r["m"] for r in rs]
                b = [m.get("bound") for m in ms]
                w = [m.get("whole") for m in ms]
                meds[tool] = (med(b), med(w))
                totals.setdefault((job, tool), []).append((med(b), med(w)))
            for tool in tools:
                rs = [r for r in rows if r["job"] == job and r["target"] == t and r["tool"] == tool]
                if not rs:
                    continue
                ms = [r["m"] for r in rs]
                b = [m.get("bound") for m in ms]
                w = [m.get("whole") for m in ms]
                su = med([m.get("startups") for m in ms])
                s_job = S.get(job)
                lb, lw = meds.get("lightning", (None, None))
                vs = "-" if tool == "lightning" else "%s / %s" % (ratio(med(b), lb), ratio(med(w), lw))
                print("| %s | about %s of 1:%s (%s) | %s | %d | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s |" % (
                    job, t, rs[0]["range"], rs[0]["cap"], tool, len(rs),
                    "/".join(sorted({str(m.get("first", "-")) for m in ms})),
                    "/".join(sorted({str(m.get("found", "-")) for m in ms}, key=lambda x: (len(x), x))),
                    "/".join(str(m.get("trials", "-")) for m in ms),
                    "-" if su is None else "%g" % su,
                    "-" if su is None or s_job is None else "%.0f" % (su * s_job),
                    fmt_s(mn(b)), fmt_s(med(b)), fmt_s(mn(w)), fmt_s(med(w)), vs))
    print()
    print("| job | tool | sum of the medians over the boundaries: to boundary s | whole s | vs Lightning, to boundary / whole |")
    print("|---|---|---|---|---|")
    for (job, tool), xs in totals.items():
        sb = sum(x[0] for x in xs) if all(x[0] is not None for x in xs) else None
        sw = sum(x[1] for x in xs) if all(x[1] is not None for x in xs) else None
        lx = totals.get((job, "lightning"), [])
        lb = sum(x[0] for x in lx) if lx and all(x[0] is not None for x in lx) else None
        lw = sum(x[1] for x in lx) if lx and all(x[1] is not None for x in lx) else None
        print("| %s | %s | %s | %s | %s |" % (job, tool, fmt_s(sb), fmt_s(sw),
                                             "-" if tool == "lightning" else "%s / %s" % (ratio(sb, lb), ratio(sw, lw))))
    print()
    print("S (a start-up of the job's own program, measured by the calibration runs, from the start to")
    print("'Running training'): " + "; ".join(detail) + "; the table uses the job's program's median.")
    print("""first size: the first size each run tried (the boundary must not sit there for the cap to be
fair). boundary found: the largest fit each search ended on (lightning: before its 5% margin).
trials and start-ups: per run, in run order / the median. start-ups x S: what the start-ups cost
again on a GPU, where S is 20-60 s rather than this CPU's few seconds (the search bench's
"launch" column). The ratios are autobatch's (or hf's) median over Lightning's median.""")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--trials", action="store_true")
    p.add_argument("--runs", action="store_true", dest="per_run")
    p.add_argument("--startup", default=None)
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
            row.update(job=f[0], tool=f[1], program=f[2], cap="%.0f" % (int(f[3]) / 1024),
                       rep=f[8] if len(f) > 8 else "1", target=f[9] if len(f) > 9 else "0",
                       range=f[10] if len(f) > 10 else "-")
            rows.append(row)
            detail.append((f[0], f[9] if len(f) > 9 else "", f[8] if len(f) > 8 else "", f[1], trials))
    if a.trials:
        for job, target, rep, tool, trials in detail:
            print("  %-8s %-3s r%-2s %-10s %s" % (job, target, rep, tool, " ".join(trials)))
        return
    if not a.per_run:
        summary(rows, a.steps, startup_s(a.startup) if a.startup else ({}, []))
        return
    cols = [("job", "job"), ("boundary", "target"), ("rep", "rep"), ("tool", "tool"), ("cap MiB", "cap"),
            ("trials", "trials"), ("sizes tried, in order", "seq"), ("wall s", "wall"), ("answer", "answer")]
    if a.steps > 0:
        cols += [("survives %d steps" % a.steps, "survives"), ("run s", "run"), ("run samples/s", "rate")]
    w = [max(len(h), *(len(str(r[k])) for r in rows)) if rows else len(h) for h, k in cols]
    print("  ".join(h.ljust(w[i]) for i, (h, _) in enumerate(cols)).rstrip())
    print("  ".join("-" * n for n in w))
    for r in rows:
        print("  ".join(str(r[k]).ljust(w[i]) for i, (_, k) in enumerate(cols)).rstrip())
    print("""
trials: autobatch's in parentheses: those it ran until it held its largest
fit L and a failure at L+1 (the boundary); the rest measure throughput or
confirm. sizes tried: x = out of memory (caught by the tool, or the trial
ended by it), x@k = after k optimizer steps, !why = another ending.
wall s: from the tool's start (start-up included) to its answer: autobatch's
whole run (in parentheses: until it held the boundary); lightning until
scale_batch_size returned; hf until the third step at the size it settled
on. lightning: Tuner.scale_batch_size(mode="binsearch") at its defaults
(init_val 2, steps_per_trial 3, margin 0.05). hf: auto_find_batch_size=True
from per_device_train_batch_size = the top of autobatch's --batch range.""")


if __name__ == "__main__":
    main()
