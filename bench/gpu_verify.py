# SPDX-License-Identifier: MIT
"""autobatch's GPU path against real boundaries (issue 25, item 8).

Run through bench/gpu_verify.sh, which prints the machine first, builds
autobatch if it can, and calls `run`.  Subcommands:

  train  --model M [--dry]        the trainer autobatch runs (preset env:
                                  AUTOBATCH_MICRO_BATCH, AUTOBATCH_MAX_STEPS)
  bisect --model M --mode MODE    the real boundary: a fork server that imports
                                  torch once (never touching CUDA) and forks one
                                  fresh process per size (its own CUDA context);
                                  MODE fraction (torch's memory fraction =
                                  BUDGET / total), plain (the card as this
                                  process finds it: held back by `hold`, or
                                  emulated by the preload library in its
                                  environment), cap (CPU: RLIMIT_AS = BUDGET)
  hold   --leave BYTES --ready F  hold all but BYTES of GPU 0 until killed
  run    [--dry] --results FILE   the whole verification, most important first,
                                  one line per finished part in FILE

Models are defined here, with random weights and synthetic data: a GPT-2
small-sized decoder with an untied head (163M parameters, sequence 256,
AdamW), the same with activation checkpointing, and a ResNet-18-sized conv
net (224 px, SGD with momentum).  --dry uses tiny versions on the CPU.
Standard library only, except the torch that train, bisect and hold import.
"""
import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

GIB = 1 << 30

MODELS = {
    # name: (kind, checkpointing, full-size config, tiny config)
    "gpt": ("gpt", False, dict(vocab=50257, d=768, layers=12, heads=12, seq=256),
            dict(vocab=512, d=64, layers=2, heads=4, seq=64)),
    "gpt-ckpt": ("gpt", True, dict(vocab=50257, d=768, layers=12, heads=12, seq=256),
                 dict(vocab=512, d=64, layers=2, heads=4, seq=64)),
    "conv": ("conv", False, dict(res=224, widths=(64, 128, 256, 512), classes=1000),
             dict(res=48, widths=(8, 16, 32, 64), classes=10)),
}
# The search range and the larger size of the estimate, per model.
RANGE = {"gpt": (1, 256, 8), "gpt-ckpt": (1, 512, 16), "conv": (1, 2048, 32)}
RANGE_DRY = {"gpt": (1, 64, 6), "gpt-ckpt": (1, 64, 6), "conv": (1, 64, 6)}
STEP, STEP_DRY = {}, {}   # the grid step of a model's micro-batch (F5-TTS: frames of a clip)


def step_of(model, dry):
    return (STEP_DRY if dry else STEP).get(model, 1)
EXTRA_BUILDERS = {}  # kind -> build(torch, config, checkpointing, device) (bench/gpu_seeds.py)


# --------------------------------------------------------------- the models
def build(torch, name, dry, dev):
    """(model, optimizer, make_batch(b) -> (inputs, targets), loss_fn)."""
    import torch.utils.checkpoint  # noqa: F401 (not imported by torch itself on 1.13)
    nn = torch.nn
    F = torch.nn.functional
    kind, ckpt, big, tiny = MODELS[name]
    c = tiny if dry else big
    torch.manual_seed(0)
    if kind in EXTRA_BUILDERS:
        model, opt, batch, loss_fn = EXTRA_BUILDERS[kind](torch, c, ckpt, dev)
    elif kind == "gpt":
        d, h, T, V = c["d"], c["heads"], c["seq"], c["vocab"]

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = nn.LayerNorm(d, device=dev)
                self.qkv = nn.Linear(d, 3 * d, device=dev)
                self.proj = nn.Linear(d, d, device=dev)
                self.ln2 = nn.LayerNorm(d, device=dev)
                self.fc = nn.Linear(d, 4 * d, device=dev)
                self.out = nn.Linear(4 * d, d, device=dev)
                self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool, device=dev).tril())

            def forward(self, x):
                B, L, C = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
                q = q.view(B, L, h, C // h).transpose(1, 2)
                k = k.view(B, L, h, C // h).transpose(1, 2)
                v = v.view(B, L, h, C // h).transpose(1, 2)
                att = (q @ k.transpose(-2, -1)) * (1.0 / (C // h) ** 0.5)
                att = att.masked_fill(~self.mask[:L, :L], float("-inf")).softmax(dim=-1)
                y = (att @ v).transpose(1, 2).reshape(B, L, C)
                x = x + self.proj(y)
                return x + self.out(F.gelu(self.fc(self.ln2(x))))

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(V, d, device=dev)
                self.pos = nn.Embedding(T, d, device=dev)
                self.blocks = nn.ModuleList([Block() for _ in range(c["layers"])])
                self.ln = nn.LayerNorm(d, device=dev)
                self.head = nn.Linear(d, V, bias=False, device=dev)

            def forward(self, idx):
                x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
                for blk in self.blocks:
                    if ckpt:
                        x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
                    else:
                        x = blk(x)
                return self.head(self.ln(x))

        model = GPT()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def batch(b):
            x = torch.randint(V, (b, T + 1), device=dev)
            return x[:, :-1], x[:, 1:]

        def loss_fn(out, y):
            return F.cross_entropy(out.reshape(-1, V), y.reshape(-1))
    else:
        widths = c["widths"]

        class Basic(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False, device=dev)
                self.b1 = nn.BatchNorm2d(cout, device=dev)
                self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False, device=dev)
                self.b2 = nn.BatchNorm2d(cout, device=dev)
                self.short = None
                if stride != 1 or cin != cout:
                    self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False, device=dev),
                                               nn.BatchNorm2d(cout, device=dev))

            def forward(self, x):
                y = F.relu(self.b1(self.c1(x)))
                y = self.b2(self.c2(y))
                return F.relu(y + (x if self.short is None else self.short(x)))

        layers = [nn.Conv2d(3, widths[0], 7, 2, 3, bias=False, device=dev), nn.BatchNorm2d(widths[0], device=dev),
                  nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        cin = widths[0]
        for i, w in enumerate(widths):
            layers += [Basic(cin, w, 1 if i == 0 else 2), Basic(w, w, 1)]
            cin = w
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, c["classes"], device=dev)]
        model = nn.Sequential(*layers)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        R, K = c["res"], c["classes"]

        def batch(b):
            return (torch.randn(b, 3, R, R, device=dev), torch.randint(K, (b,), device=dev))

        def loss_fn(out, y):
            return F.cross_entropy(out, y)
    if dry:
        # 8 MiB a sample that costs next to no compute, so that a CPU cap
        # leaves room for a recording trial's own memory below the boundary.
        inner_batch, inner_loss = batch, loss_fn
        g = step_of(name, True)

        def batch(b):
            x, y = inner_batch(b)
            return x, (y, torch.ones(max(1, b // g), 1 << 20))

        def loss_fn(out, yb):
            return inner_loss(out, yb[0]) + (yb[1] * 0.0).sum()
    return model, opt, batch, loss_fn


def train_steps(torch, parts, b, steps, on_step=None):
    model, opt, batch, loss_fn = parts
    for i in range(steps):
        x, y = batch(b)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        v = loss.item()
        if on_step:
            on_step(i + 1, v)


def torch_setup(torch, dry):
    if dry:
        torch.set_num_threads(1)
        return "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True   # speed only; memory is the same
    torch.backends.cudnn.allow_tf32 = True
    return "cuda"


# ---------------------------------------------------------------- train
def cmd_train(a):
    import torch
    dev = torch_setup(torch, a.dry)
    b = int(os.environ.get("AUTOBATCH_MICRO_BATCH") or a.batch)
    steps = int(os.environ.get("AUTOBATCH_MAX_STEPS") or a.steps)
    parts = build(torch, a.model, a.dry, dev)
    print("model %s, micro-batch %d, %d steps, %s, PYTORCH_CUDA_ALLOC_CONF=%s"
          % (a.model, b, steps, dev, os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")), flush=True)
    t0 = time.monotonic()

    def on_step(n, v):
        print("step %d/%d loss %.4f (%.2f s)" % (n, steps, v, time.monotonic() - t0), flush=True)
    train_steps(torch, parts, b, steps, on_step)   # an OOM propagates, as a trainer's does


# ---------------------------------------------------------------- bisect
def _is_oom(e):
    s = str(e)
    return (isinstance(e, MemoryError) or "out of memory" in s.lower() or "can't allocate memory" in s
            or "bad_alloc" in s or "Cannot allocate memory" in s or getattr(e, "errno", 0) == 12
            or "CUBLAS_STATUS_ALLOC_FAILED" in s or "CUDNN_STATUS_ALLOC_FAILED" in s
            or "CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous" in s)


def _vm(field):
    try:
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _child_body(torch, a, sizes, limit):
    """In a forked process: set the limit, build the model, train each size
    for a.steps steps in turn (the cache emptied between sizes)."""
    out = {"sizes": []}
    if a.dry:
        if limit:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        dev = torch_setup(torch, True)
    else:
        dev = torch_setup(torch, False)
        torch.cuda.set_device(0)
        free, total = torch.cuda.mem_get_info()
        out["start_free"], out["total"] = free, total
        if limit:
            torch.cuda.set_per_process_memory_fraction(min(1.0, limit / float(total)))
    try:
        parts = build(torch, a.model, a.dry, dev)
    except BaseException as e:
        out["outcome"] = "oom" if _is_oom(e) else "error"
        out["what"] = ("%s: %s" % (type(e).__name__, e))[:300]
        out["at"] = "model"
        return out
    for b in sizes:
        rec = {"b": b}
        t0 = time.monotonic()
        try:
            if not a.dry:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            train_steps(torch, parts, b, a.steps)
            if not a.dry:
                torch.cuda.synchronize()
            rec["outcome"] = "fit"
        except BaseException as e:
            rec["outcome"] = "oom" if _is_oom(e) else "error"
            rec["what"] = ("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))[:300]
        rec["s"] = round(time.monotonic() - t0, 3)
        if a.dry:
            rec["vm_peak"] = _vm("VmPeak")
            rec["peak"] = rec["vm_peak"]
        else:
            try:
                st = torch.cuda.memory_stats()
                rec["reserved"] = torch.cuda.max_memory_reserved()
                rec["allocated"] = torch.cuda.max_memory_allocated()
                rec["retries"] = st.get("num_alloc_retries")
                free, total = torch.cuda.mem_get_info()
                rec["outside"] = total - free - torch.cuda.memory_reserved()
                rec["peak"] = rec["reserved"]
            except Exception as e:
                rec["stats_error"] = str(e)[:200]
        out["sizes"].append(rec)
        if rec["outcome"] != "fit":
            break
    last = out["sizes"][-1] if out["sizes"] else {}
    out["outcome"] = last.get("outcome", "error")
    return out


def _fork_child(torch, a, sizes, limit, timeout):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = _child_body(torch, a, sizes, limit)
        except BaseException as e:
            res = {"outcome": "error", "what": ("%s: %s" % (type(e).__name__, e))[:300], "sizes": []}
        try:
            data = json.dumps(res).encode()
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    buf = b""
    end = time.monotonic() + timeout
    timed_out = False
    while True:
        left = end - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    if timed_out:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os.waitpid(pid, 0)
    if timed_out:
        return {"outcome": "timeout", "sizes": []}
    try:
        return json.loads(buf.decode())
    except ValueError:
        return {"outcome": "error", "what": "the child died without an answer", "sizes": []}


def cmd_bisect(a):
    import torch  # never touches CUDA here: each fork starts its own context
    t_start = time.monotonic()
    deadline = a.deadline or (time.time() + 3600)
    lo, hi, s3 = (RANGE_DRY if a.dry else RANGE)[a.model]
    g = step_of(a.model, a.dry)
    log = open(a.log, "a") if a.log else None
    probes = []

    def note(kind, sizes, res):
        rec = {"model": a.model, "mode": a.mode, "alloc": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
               "kind": kind, "sizes_asked": sizes, "t": round(time.monotonic() - t_start, 2)}
        rec.update(res)
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()

    def left():
        return deadline - time.time()

    limit = None
    result = {"model": a.model, "mode": a.mode, "estimate": None, "budget": None, "curve": []}
    budget = a.budget
    hint = a.hint
    if not a.no_estimate:
        # One process, uncapped: the peak at the trace sizes (2, 3) and at s3,
        # the empty cache between sizes; a line through 2 and s3 gives the estimate.
        sizes = [2 * g, 3 * g, s3]
        res = _fork_child(torch, a, sizes, None, min(120, max(5, left())))
        note("estimate", sizes, res)
        curve = [(r["b"], r.get("peak"), r.get("outcome")) for r in res.get("sizes", [])]
        result["curve"] = res.get("sizes", [])
        result["outside"] = next((r.get("outside") for r in reversed(res.get("sizes", []))
                                  if r.get("outside") is not None), None)
        pk = {b: p for b, p, o in curve if o == "fit" and p}
        b2 = 2 * g
        if b2 in pk and s3 in pk and pk[s3] > pk[b2]:
            slope = (pk[s3] - pk[b2]) / float(s3 - b2)
            result["slope"] = int(slope)
            if budget is None and a.target:   # CPU: a cap that puts the boundary near target
                budget = int(pk[b2] + slope * (a.target * g - b2 + 0.5 * g))
            if budget is not None and a.mode != "plain":
                hint = int(b2 + (budget - pk[b2]) / slope)
        elif budget is None and a.target and pk:
            budget = max(pk.values()) + (64 << 20)
        result["estimate"] = hint
        if res.get("outcome") not in ("fit", "oom"):
            result["error"] = res.get("what") or res.get("outcome")
    result["budget"] = budget
    if a.mode in ("fraction", "cap"):
        limit = budget
        if not limit:
            result["error"] = result.get("error") or "no budget"
            print(json.dumps(result), flush=True)
            return
    fits = {}

    def t(k):
        b = k * g
        if left() < 3:
            raise TimeoutError
        res = _fork_child(torch, a, [b], limit, min(120, max(3, left())))
        note("probe", [b], res)
        probes.append((b, res.get("outcome"), (res.get("sizes") or [{}])[-1].get("peak"),
                       (res.get("sizes") or [{}])[-1].get("retries")))
        o = res.get("outcome")
        if o not in ("fit", "oom"):
            raise RuntimeError("size %d: %s %s" % (b, o, res.get("what") or
                                                   (res.get("sizes") or [{}])[-1].get("what", "")))
        fits[b] = o == "fit"
        return fits[b]

    lo, hi = max(1, -(-lo // g)), hi // g      # in grid steps from here

    good = bad = None
    try:
        b = max(lo, min(hi, hint // g if hint else (lo + hi) // 2))
        step = max(1, b // 100)
        if t(b):
            good = b
            while True:
                nb = min(hi, good + step)
                if nb == good:
                    break
                if t(nb):
                    good = nb
                    step *= 2
                else:
                    bad = nb
                    break
        else:
            bad = b
            while True:
                nb = max(lo, bad - step)
                if nb == bad:
                    break
                if t(nb):
                    good = nb
                    break
                bad = nb
                step *= 2
        if good is not None and bad is not None:
            while bad - good > 1:
                mid = (good + bad) // 2
                if t(mid):
                    good = mid
                else:
                    bad = mid
    except TimeoutError:
        result["cut"] = "deadline"
    except RuntimeError as e:
        result["error"] = str(e)[:300]
    good = None if good is None else good * g
    bad = None if bad is None else bad * g
    result.update(boundary=good, fail=bad, probes=len(probes), fork_children=len(probes) + (0 if a.no_estimate else 1),
                  trace=" ".join("%d%s" % (b, "+" if o == "fit" else "x") for b, o, _, _ in probes),
                  peaks={str(b): p for b, o, p, _ in probes if p},
                  retries={str(b): r for b, o, _, r in probes if r},
                  exact=(good is not None and bad == good + g) or (good == hi * g), step=g,
                  wall=round(time.monotonic() - t_start, 1))
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------- hold
def cmd_hold(a):
    import torch
    held = []
    chunk = 1 << 30
    if not a.dry:
        torch.cuda.init()
        while True:
            free, total = torch.cuda.mem_get_info()
            want = free - a.leave
            if want < (2 << 20):
                break
            n = min(chunk, want) // (2 << 20) * (2 << 20)
            try:
                held.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
            except RuntimeError:
                chunk //= 2
                if chunk < (2 << 20):
                    break
        free, total = torch.cuda.mem_get_info()
    else:
        free = total = 0
    with open(a.ready + ".tmp", "w") as f:
        f.write("%d %d\n" % (free, total))
    os.rename(a.ready + ".tmp", a.ready)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- run
class Run(object):
    def __init__(self, a):
        self.a = a
        self.dry = a.dry
        self.t0 = time.time()
        self.deadline = self.t0 + a.limit_s
        self.py = a.python
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.me = os.path.abspath(a.script or __file__)
        self.work = a.work
        os.makedirs(self.work, exist_ok=True)
        self.res = open(a.results, "a")
        self.jsonl = open(os.path.join(self.work, "records.jsonl"), "a")
        self.ab = a.autobatch if a.autobatch and os.access(a.autobatch, os.X_OK) else None
        self.emu_lib = a.gpuemu if a.gpuemu and os.path.exists(a.gpuemu) else None
        self.budget = a.budget_gib * GIB
        self.cells = {}     # (model, alloc) -> dict of results
        self.order = []

    # output -----------------------------------------------------------
    def line(self, s):
        s = "[%5.1fs] %s" % (time.time() - self.t0, s)
        print(s, flush=True)
        self.res.write(s + "\n")
        self.res.flush()

    def record(self, rec):
        self.jsonl.write(json.dumps(rec) + "\n")
        self.jsonl.flush()

    def left(self):
        return self.deadline - time.time()

    def cell(self, model, alloc):
        k = (model, alloc)
        if k not in self.cells:
            self.cells[k] = {}
            self.order.append(k)
        return self.cells[k]

    def env(self, alloc, extra=None):
        e = dict(os.environ)
        e.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        conf = ALLOCS[alloc]
        if conf:
            e["PYTORCH_CUDA_ALLOC_CONF"] = conf
        e["XDG_CACHE_HOME"] = os.path.join(self.work, "cache")
        e["XDG_STATE_HOME"] = os.path.join(self.work, "state")
        if self.dry:
            # what --replay sets under --trial-memory-limit, set for every run alike
            e.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
            e.setdefault("MALLOC_ARENA_MAX", "1")
            e.setdefault("OMP_NUM_THREADS", "1")
            e.setdefault("PYTHONHASHSEED", "0")
        if extra:
            e.update(extra)
        return e

    def call(self, argv, env, timeout, log):
        """Run argv with its output to log; (rc, stdout text, seconds)."""
        t0 = time.time()
        with open(log, "ab") as lf:
            p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=lf, start_new_session=True)
            try:
                out, _ = p.communicate(timeout=max(1, timeout))
                rc = p.returncode
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    out, _ = p.communicate(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    out, _ = p.communicate()
                rc = 124
            lf.write(out)
        return rc, out.decode(errors="replace"), time.time() - t0

    # parts ------------------------------------------------------------
    def bisect(self, model, alloc, mode, extra_env=None, hint=None, name=None):
        name = name or mode
        c = self.cell(model, alloc)
        argv = [self.py, self.me, "bisect", "--model", model, "--mode",
                "cap" if self.dry and mode in ("fraction", "plain") else mode,
                "--deadline", str(self.deadline - 2), "--log", os.path.join(self.work, "bisect.jsonl")]
        if self.dry:
            argv += ["--dry"]
            if mode == "fraction" or not c.get("budget"):
                argv += ["--target", "12"]
            else:
                argv += ["--budget", str(c["budget"])]
        elif mode == "fraction":
            argv += ["--budget", str(self.budget)]
        if hint:
            argv += ["--hint", str(hint), "--no-estimate"]
        rc, out, secs = self.call(argv, self.env(alloc, extra_env), self.left() + 5,
                                  os.path.join(self.work, "bisect-%s-%s-%s.log" % (model, alloc, name)))
        r = None
        for ln in out.splitlines():
            if ln.startswith("{"):
                try:
                    r = json.loads(ln)
                except ValueError:
                    pass
        if r is None:
            self.line("%s %s %s: no answer (exit %s, %.0f s); see bisect-%s-%s-%s.log"
                      % (model, alloc, name, rc, secs, model, alloc, name))
            c[name] = {"error": "exit %s" % rc}
            return None
        r["wall_total"] = round(secs, 1)
        c[name] = r
        if mode == "fraction" and r.get("budget"):
            c["budget"] = r["budget"]
        self.record({"part": name, "model": model, "alloc": alloc, **r})
        curve = ""
        if r.get("curve"):
            curve = "; uncapped peak %s" % ", ".join(
                "%d: %s" % (x["b"], mib(x.get("peak"))) for x in r["curve"])
            if r.get("outside") is not None:
                curve += " (outside the allocator %s)" % mib(r["outside"])
        self.line("%s %s %s: boundary %s (fails %s)%s%s, %d fresh processes (%s), %.1f s; estimate %s, budget %s%s"
                  % (model, alloc, name, r.get("boundary"), r.get("fail"),
                     "" if r.get("exact") else " NOT EXACT", " [%s]" % (r.get("error") or r.get("cut"))
                     if r.get("error") or r.get("cut") else "", r.get("fork_children", 0), r.get("trace"),
                     secs, r.get("estimate"), mib(r.get("budget")), curve))
        if r.get("retries"):
            self.line("   allocator retries at %s" % r["retries"])
        return r

    def autobatch(self, model, alloc, replay):
        name = "replay" if replay else "plain"
        c = self.cell(model, alloc)
        lo, hi, _ = (RANGE_DRY if self.dry else RANGE)[model]
        g = step_of(model, self.dry)
        tag = "%s-%s-%s" % (model, alloc, name)
        js = os.path.join(self.work, tag + ".json")
        budget_s = int(min(self.left() - 8, self.a.search_budget_s if replay else self.a.plain_budget_s))
        if budget_s < 15:
            self.line("%s %s %s: skipped, %d s left" % (model, alloc, name, self.left()))
            return None
        argv = [self.ab, "--quiet", "--no-cache", "--preset", "env", "--batch", "%d:%d:%d" % (lo, hi, g),
                "--steps", "3", "--warmup", "1", "--kill-grace", "2s", "--hang-timeout", "90s",
                "--trial-timeout", "150s", "--budget", "%ds" % budget_s, "--json", js]
        if self.dry:
            if not c.get("budget"):
                self.line("%s %s %s: skipped, no CPU cap (the real boundary did not run)" % (model, alloc, name))
                return None
            argv += ["--trial-memory-limit", "%dK" % (c["budget"] // 1024)]
        else:
            argv += ["--emulate-gpu-memory", "%dG" % self.a.budget_gib]
        traces = None
        if replay:
            traces = os.path.join(self.work, "traces-" + tag)
            os.makedirs(traces, exist_ok=True)
            argv += ["--replay", "--keep-traces", traces]
        argv += ["--", self.py, self.me, "train", "--model", model] + (["--dry"] if self.dry else [])
        rc, out, secs = self.call(argv, self.env(alloc), min(budget_s + 30, self.left() + 10),
                                  os.path.join(self.work, tag + ".out"))
        try:
            doc = json.load(open(js))
        except (OSError, ValueError) as e:
            self.line("%s %s %s: no results file (exit %d, %.0f s): %s" % (model, alloc, name, rc, secs, e))
            c[name] = {"error": "exit %d" % rc, "wall": secs}
            return None
        mf = (doc.get("max_fit") or [{}])[0]
        trials = doc.get("trials") or []
        seq = " ".join("%d%s%s" % (t.get("micro_batch", -1), {"fit": "+", "oom": "x"}.get(t.get("outcome"), "?"),
                                   "r" if t.get("recorded") else "") for t in trials)
        r = {"max_fit": mf.get("micro_batch"), "smallest_fail": mf.get("smallest_fail"),
             "trials": (doc.get("summary") or {}).get("trials", len(trials)), "wall": round(secs, 1),
             "rc": rc, "seq": seq, "to_boundary": to_boundary(trials, mf.get("micro_batch"), g), "step": g}
        if replay:
            cells = ((doc.get("replay") or {}).get("cells") or [{}])
            g = cells[0]
            r.update(state=g.get("state"), why=g.get("why"), first=g.get("first_prediction"),
                     predicted=g.get("predicted_max_fit"), need_at=g.get("need_at"),
                     predicted_need=g.get("predicted_need_bytes"), measured_need=g.get("measured_need_bytes"),
                     need_error_pct=g.get("need_error_pct"), model=g.get("model"),
                     capacity=(doc.get("replay") or {}).get("capacity_bytes"), traces=traces)
        c[name] = r
        self.record({"part": name, "model": model, "alloc": alloc, **r})
        self.line("%s %s %s: max_fit %s (smallest fail %s), %s trials (%s to the exact boundary), %.0f s, exit %d: %s"
                  % (model, alloc, name, r["max_fit"], r["smallest_fail"], r["trials"], r["to_boundary"],
                     secs, rc, seq))
        if replay:
            self.line("   replay %s%s: first prediction %s, final %s; need at %s predicted %s measured %s (%s%%); model %s"
                      % (r["state"], " (%s)" % r["why"] if r["why"] else "", r["first"], r["predicted"],
                         r["need_at"], mib(r["predicted_need"]), mib(r["measured_need"]),
                         fmt(r["need_error_pct"]), json.dumps(r["model"])))
            self.predict(model, alloc, traces)
        return r

    def predict(self, model, alloc, traces):
        """autobatch predict on the kept traces: at the emulated card, at the
        fraction's budget (plus what the recording measured outside the
        allocator), and the simulated need at the sizes measured for real."""
        c = self.cell(model, alloc)
        if not any(f.endswith(".txt") for f in os.listdir(traces)):
            self.line("   predict: no traces kept")
            return
        lo, hi, s3 = (RANGE_DRY if self.dry else RANGE)[model]
        g = step_of(model, self.dry)
        log = os.path.join(self.work, "predict-%s-%s.log" % (model, alloc))

        def pred(cap_bytes, rng):
            rc, out, _ = self.call([self.ab, "predict", traces, "--capacity", "%dK" % (cap_bytes // 1024),
                                    "--batch", rng], self.env(alloc), 30, log)
            m = re.search(r"largest micro-batch (\d+)", out)
            n = re.search(r"needs ([0-9.]+) GiB", out)
            return (int(m.group(1)) if m else None), (float(n.group(1)) if n else None), out.strip()

        outside = ((c.get("replay") or {}).get("model") or {}).get("outside_bytes") or 0
        p = {}
        if not self.dry:
            p["card"] = pred(self.budget, "%d:%d:%d" % (lo, hi, g))[0]
        if c.get("budget"):   # on CPU the cap is the whole address space, outside included
            p["fraction"] = pred(c["budget"] + (0 if self.dry else outside), "%d:%d:%d" % (lo, hi, g))[0]
        c["predict"] = p
        frac = c.get("fraction") or {}
        sizes = sorted(set([2 * g, 3 * g, s3] + [b for b in (frac.get("boundary"), frac.get("fail")) if b]))
        curve = []
        real = {x["b"]: x.get("peak") for x in frac.get("curve") or [] if x.get("outcome") == "fit"}
        real.update({int(k): v for k, v in (frac.get("peaks") or {}).items()
                     if frac.get("fail") is None or int(k) < frac["fail"]})
        for b in sizes:
            _, need, out = pred(1 << 50, "%d:%d" % (b, b))
            # on CUDA the need is peak reserved + outside; on CPU VmSize at the
            # step's start + its peak, against VmPeak
            sim = None if need is None else int(need * GIB - (0 if self.dry else outside))
            curve.append((b, sim, real.get(b)))
        c["casim_curve"] = curve
        self.record({"part": "predict", "model": model, "alloc": alloc, "predict": p, "outside": outside,
                     "curve": curve})
        self.line("   predict: %s; outside %s; simulated vs real peak %s: %s"
                  % (", ".join("%s %s" % kv for kv in p.items()), mib(outside),
                     "reserved (GiB/100 resolution)" if not self.dry else "(VmPeak)",
                     ", ".join("%d: %s / %s" % (b, mib(s), mib(r)) for b, s, r in curve)))

    def held(self, model, alloc, hint):
        ready = os.path.join(self.work, "hold.ready")
        if os.path.exists(ready):
            os.unlink(ready)
        log = open(os.path.join(self.work, "hold.log"), "ab")
        argv = [self.py, self.me, "hold", "--leave", str(self.budget), "--ready", ready] + (["--dry"] if self.dry else [])
        p = subprocess.Popen(argv, env=self.env("default"), stdout=log, stderr=log, start_new_session=True)
        try:
            end = time.time() + 60
            while not os.path.exists(ready) and time.time() < end and p.poll() is None:
                time.sleep(0.1)
            if not os.path.exists(ready):
                self.line("%s %s held: the holder did not get ready" % (model, alloc))
                return None
            free = open(ready).read().split()[0]
            self.cell(model, alloc)["held_free"] = int(free)
            return self.bisect(model, alloc, "plain", hint=hint, name="held")
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
            log.close()

    def emulated(self, model, alloc, hint):
        if not self.emu_lib:
            self.line("%s %s emulated: skipped, no libautobatch-gpuemu.so" % (model, alloc))
            return None
        pre = os.environ.get("LD_PRELOAD")
        extra = {"LD_PRELOAD": self.emu_lib + (":" + pre if pre else ""),
                 "AUTOBATCH_EMULATE_GPU_MEMORY": str(self.budget)}
        return self.bisect(model, alloc, "plain", extra_env=extra, hint=hint, name="emulated")

    def hint_for_card(self, model, alloc):
        """Where a 16 GiB card's boundary should be: the fraction's, less
        what lies outside the allocator, at the estimate's slope."""
        f = self.cell(model, alloc).get("fraction") or {}
        b = f.get("boundary")
        if not b:
            return None
        if self.dry or not f.get("slope"):
            return b
        return max(1, int(b - (f.get("outside") or 0) / float(f["slope"])))

    # the plan ---------------------------------------------------------
    def group(self, model, alloc, parts):
        for part in parts:
            need = {"fraction": 8, "replay": 25, "held": 8, "emulated": 6, "plain": 25}[part]
            if self.left() < need:
                self.line("%s %s %s: skipped, %d s left" % (model, alloc, part, self.left()))
                continue
            try:
                if part == "fraction":
                    self.bisect(model, alloc, "fraction")
                elif part in ("replay", "plain"):
                    if not self.ab:
                        self.line("%s %s %s: skipped, no autobatch binary" % (model, alloc, part))
                        continue
                    self.autobatch(model, alloc, part == "replay")
                elif part == "held":
                    self.held(model, alloc, self.hint_for_card(model, alloc))
                elif part == "emulated":
                    self.emulated(model, alloc, self.hint_for_card(model, alloc))
            except Exception as e:  # one part's failure must not stop the others
                self.line("%s %s %s: failed: %s: %s" % (model, alloc, part, type(e).__name__, e))
        self.line("row: " + self.row(model, alloc))

    def plan(self):
        full = ["fraction", "replay", "held", "emulated"]
        if self.dry:
            # every part once, every model's real boundary (CI's 2 cores)
            return [("gpt", "default", full + ["plain"]),
                    ("gpt-ckpt", "default", ["fraction"]),
                    ("conv", "default", ["fraction"]),
                    ("gpt", "expandable", ["fraction"])]
        only = os.environ.get("GV_PLAN")
        if only:  # "model:alloc:part,part;..." (a rerun of what an earlier run left out)
            return [(m, a, parts.split(",")) for m, a, parts in
                    (item.split(":") for item in only.split(";") if item)]
        return [("gpt", "default", full),
                ("gpt-ckpt", "default", full),
                ("gpt", "expandable", full),
                ("gpt", "default", ["plain"]),
                ("gpt", "async", ["fraction", "held", "emulated"]),
                ("conv", "default", full),
                ("conv", "expandable", full),
                ("gpt-ckpt", "expandable", full),
                ("gpt-ckpt", "default", ["plain"]),
                ("conv", "default", ["plain"]),
                ("gpt", "async", ["replay"])]

    def row(self, model, alloc):
        c = self.cell(model, alloc)
        f, h, e = c.get("fraction") or {}, c.get("held") or {}, c.get("emulated") or {}
        r, p = c.get("replay") or {}, c.get("plain") or {}
        pr = c.get("predict") or {}
        rep = "-"
        if r:
            rep = "%s/%s" % (r.get("first"), r.get("predicted")) if r.get("first") is not None else \
                (r.get("state") or "error")
        cols = [model, alloc, bnd(f), str(pr.get("fraction", "-")), bnd(h), bnd(e), rep,
                str(pr.get("card", "-")), ab_ans(r), ab_ans(p),
                "%s/%s" % (r.get("trials", "-"), p.get("trials", "-")),
                "%s/%s" % (fmt0(r.get("wall")), fmt0(p.get("wall")))]
        return " | ".join(cols)

    def table(self):
        self.line("table (B = largest micro-batch that trains 3 steps, '(fails F)' when not F = B+1):")
        hdr = ["model", "allocator", "real@fraction", "predict@fraction", "held-back card", "emulated (bisect)",
               "replay first/final", "predict@card", "replay search", "plain search", "trials r/p", "wall s r/p"]
        self.line("| " + " | ".join(hdr) + " |")
        self.line("|" + "---|" * len(hdr))
        for k in self.order:
            self.line("| " + self.row(*k) + " |")

    def main(self):
        budget = "CPU address-space caps near 12 samples (--dry)" if self.dry else "%d GiB" % self.a.budget_gib
        self.line("gpu_verify%s: budget %s, limit %d s, autobatch %s, emulation library %s, python %s"
                  % (" --dry" if self.dry else "", budget, self.a.limit_s, self.ab or "MISSING",
                     self.emu_lib or "MISSING", self.py))
        only = [x for x in os.environ.get("GV_ONLY", "").replace(",", " ").split() if x]
        for model, alloc, parts in self.plan():
            if only and "%s:%s" % (model, alloc) not in only:
                continue
            if self.left() < 6:
                self.line("%s %s: skipped (%s), %d s left" % (model, alloc, ",".join(parts), self.left()))
                continue
            self.group(model, alloc, parts)
        self.table()
        self.line("done in %.0f s" % (time.time() - self.t0))


ALLOCS = {"default": "", "expandable": "expandable_segments:True", "async": "backend:cudaMallocAsync"}


def bnd(r):
    if not r:
        return "-"
    if r.get("boundary") is None:
        return "none" if r.get("fail") else (r.get("error") and "error") or "-"
    s = str(r["boundary"])
    if r.get("fail") is not None and r["fail"] != r["boundary"] + r.get("step", 1):
        s += " (fails %s)" % r["fail"]
    return s


def ab_ans(r):
    if not r:
        return "-"
    if r.get("max_fit") is None:
        return "none" if r.get("smallest_fail") else "error" if r.get("error") else "-"
    s = str(r["max_fit"])
    if r.get("smallest_fail") is not None and r["smallest_fail"] != r["max_fit"] + r.get("step", 1):
        s += " (fails %s)" % r["smallest_fail"]
    return s


def to_boundary(trials, b, g=1):
    """Trials in run order until the final largest fit B has fitted and
    B+1 has failed (None when the run did not show both)."""
    if b is None:
        return None
    seen_fit = seen_fail = False
    for i, t in enumerate(trials):
        if t.get("micro_batch") == b and t.get("outcome") == "fit":
            seen_fit = True
        if t.get("micro_batch") == b + g and t.get("outcome") == "oom":
            seen_fail = True
        if seen_fit and seen_fail:
            return i + 1
    return None


def mib(v):
    return "-" if v is None else "%d MiB" % (int(v) >> 20)


def fmt(v):
    return "-" if v is None else "%.2f" % v


def fmt0(v):
    return "-" if v is None else "%.0f" % v


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd")
    t = sub.add_parser("train")
    t.add_argument("--model", choices=sorted(MODELS), required=True)
    t.add_argument("--batch", type=int, default=2)
    t.add_argument("--steps", type=int, default=4)
    t.add_argument("--dry", action="store_true")
    b = sub.add_parser("bisect")
    b.add_argument("--model", choices=sorted(MODELS), required=True)
    b.add_argument("--mode", choices=("fraction", "plain", "cap"), required=True)
    b.add_argument("--budget", type=int, help="bytes: the allocator's limit (fraction) or RLIMIT_AS (cap)")
    b.add_argument("--target", type=int, help="cap mode without --budget: a cap for a boundary near this")
    b.add_argument("--hint", type=int)
    b.add_argument("--no-estimate", action="store_true")
    b.add_argument("--steps", type=int, default=3)
    b.add_argument("--deadline", type=float, help="time.time() to stop at")
    b.add_argument("--log")
    b.add_argument("--dry", action="store_true")
    h = sub.add_parser("hold")
    h.add_argument("--leave", type=int, required=True)
    h.add_argument("--ready", required=True)
    h.add_argument("--dry", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("--dry", action="store_true")
    r.add_argument("--script", help=argparse.SUPPRESS)
    r.add_argument("--results", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--python", default=sys.executable)
    r.add_argument("--autobatch")
    r.add_argument("--gpuemu")
    r.add_argument("--budget-gib", type=int, default=16)
    r.add_argument("--limit-s", type=float, default=360)
    r.add_argument("--search-budget-s", type=int, default=60)
    r.add_argument("--plain-budget-s", type=int, default=75)
    a = p.parse_args(argv)
    if a.cmd == "train":
        cmd_train(a)
    elif a.cmd == "bisect":
        cmd_bisect(a)
    elif a.cmd == "hold":
        cmd_hold(a)
    elif a.cmd == "run":
        Run(a).main()
    else:
        p.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
