# SPDX-License-Identifier: MIT
# autobatch's in-process probe for Python/PyTorch trials.
#
# autobatch puts the directory holding this file first on a trial's
# PYTHONPATH, so every Python process of the trial (the launcher, each
# rank, DataLoader workers) runs it at start-up.  It first runs the
# sitecustomize it shadows (Debian's, a virtualenv's, the user's), then,
# only when AUTOBATCH_PROBE names autobatch's channel file, waits for
# `import torch` and reports to that file, one JSON object per line:
#
#   {"ab":"torch","pid":P,"rank":R,"version":"2.8.0","hook":"global"}
#       torch was imported and the step hooks are in place ("global":
#       torch's optimizer step hooks; "wrap": Optimizer.step wrapped, for
#       torch < 2.0);
#   {"ab":"step","pid":P,"rank":R,"world":W,"step":N,"t":T,
#    "res":B,"alloc":B,"held":B,"bs":S,"blen":S,"nb":K,"vm":KB,
#    "seen":S,"fw":F,"elems":E,"tok":X,"retries":Y,"outside":B,"ctotal":B}
#       the N-th real optimizer step of this process finished at T
#       (time.monotonic(), the system's CLOCK_MONOTONIC); on CUDA the
#       step's peak bytes reserved and allocated by the caching
#       allocator (reset after each step), "held" the bytes allocated at
#       the step's end, "retries" the times the allocator freed its cache
#       and retried a failed allocation during the step (the delta of
#       memory_stats()["num_alloc_retries"]: a fit that needed it is at
#       the edge), "outside" the device's memory outside the caching
#       allocator at the step's end (cuMemGetInfo's total - free -
#       reserved: the CUDA context, other libraries, other processes), and
#       "ctotal" the device's total as CUDA sees it (on the process's first
#       CUDA step only, else null; NVML's total is larger); all null off
#       CUDA or when torch could not say; the training DataLoader's
#       batch size, the length of the last batch it yielded, and the
#       batches fetched since the previous step; with AUTOBATCH_VMPEAK
#       set, the process's peak address space so far (VmPeak, kB; null
#       otherwise: reading it costs a file read per step);
#       what the model itself got since the previous step: "fw" forwards
#       of the outermost module (the first module with a trainable
#       parameter whose forward runs while no other module's does; calls
#       nested in another module's forward do not count), "seen" the
#       leading dimensions of their first tensor argument summed (the
#       first positional tensor, else the first tensor keyword; inside a
#       dict, list or tuple the first tensor in it), so micro-batch x
#       accumulation with gradient accumulation; "elems" the most
#       elements that first tensor had in one forward; "tok" its first
#       two dimensions' product summed over the forwards (samples x
#       padded length: frames or tokens; the leading dimension for a 1-D
#       tensor).  "seen", "elems" and "tok" are null when no forward was
#       seen or one had no tensor to read; "fw" is 0 then.  Only that
#       module carries a hook once it is found (global module hooks look
#       for it until then, for at most three optimizer steps);
#   {"ab":"mem","pid":P,"rank":R,"step":2,"device":D,"params":B,"grads":B,
#    "optim":B,"peak_alloc":B,"peak_res":B,"held":B,"outside":B}
#       where the memory goes, once per process, just before the "step"
#       line of its second optimizer step (the first that runs with the
#       optimizer's state): the bytes of the distinct storages of the
#       parameters (the optimizer's param_groups and the outermost
#       module's), of their gradients, and of the tensors in the
#       optimizer's state, counting only tensors on the parameters'
#       device D ("cuda", "cpu" or "other"; AdamW's "step" counters live
#       on the CPU beside CUDA parameters and are left out there; on CUDA
#       each storage counts as the caching allocator holds it, rounded
#       up to 512 bytes); on
#       CUDA the same step's peak allocated and reserved, the bytes
#       allocated at its end and the memory outside the allocator, as in
#       that step's "step" line; null off CUDA (torch's CPU allocator
#       keeps no counters: what the activations took is not known);
#   {"ab":"mem","pid":P,"rank":R,"step":N,"at":"failure","device":D,
#    "params":B,"grads":B,"optim":B,"grads_expected":B,"optim_class":C,
#    "optim_expected":B,"peak_alloc":B,"peak_res":B,"held":B,"outside":B}
#       where the memory went in a process that ends before its second
#       optimizer step (the usual out-of-memory error at the smallest
#       batch), once per process: at an uncaught exception (a chained
#       sys.excepthook, written before the traceback is printed; also
#       threading.excepthook, which does not end the process: a later
#       line of the same process says more), else at interpreter exit
#       (atexit: a trainer that catches the error and calls sys.exit).
#       N is the optimizer steps done (0 or 1).  params, grads and optim
#       are what existed then, counted as in the line above; the
#       parameters come from every optimizer the process made (seen
#       when it was made, before its first step) and the outermost
#       module, so they are known even when no forward returned.
#       "grads_expected" is the bytes the gradients take once they all
#       exist (the parameters that require one); "optim_class" the
#       optimizer's class name ("Adam+SGD" for two; null when none was
#       made) and "optim_expected" the bytes its state takes once
#       allocated, for torch's own classes: Adam and AdamW two copies of
#       each parameter that requires a gradient (three with amsgrad), SGD
#       one with momentum (none without), Adagrad one of every parameter
#       (made with the optimizer), RMSprop one (two with momentum, one more
#       centered), each in the parameter's dtype, plus a 4-byte "step"
#       tensor per parameter where torch keeps one on that device;
#       null for any other class.  No line when no parameter was seen
#       (an error before the model or its optimizer existed).  The
#       allocator's figures are as in the line above, since the last
#       step (the peaks until the failure);
#   {"ab":"worst","pid":P,"rank":R,"mode":M,"signal":G,"batches_seen":N,
#    "whole":W,"elems":E,"longest":L,"position":I,"median":D,"first":K,
#    "scan_s":S,"sizes":[E1,E2,...]}
#       the worst case first (AUTOBATCH_WORST_CASE=off|auto|scan, default
#       auto): the first iteration of each DataLoader that starts before
#       the process's first optimizer step yields its largest batches
#       first.  M is "lengths" (the batches' sizes came from a length
#       signal G, e.g. "dataset.lengths", "batch_sampler.sampler.lengths",
#       "dataset.column:duration", "dataset.samples[].audio_length",
#       "dataset.get_frame_len": the batches'
#       index lists were reordered before any data was loaded; a batch's
#       size in elements is its samples x its longest sample, the padded
#       size), "scan" (no length signal, or AUTOBATCH_WORST_CASE=scan: the
#       loader's own batches were taken for at most
#       AUTOBATCH_WORST_CASE_SCAN seconds (default 30), or until
#       AUTOBATCH_WORST_CASE_HOLD MB (default 64) of them were held, and
#       are yielded again, the largest first, then the loader goes on; a
#       batch's size is its tensors' total elements; G is null), "off"
#       (disabled: nothing reordered, the numbers are null or 0) or
#       "none" (the loader could not be planned; nothing reordered).  N
#       batches were looked at, W true when that was the whole iteration
#       (false: the scan ran out of time or room, or the sampler's end was
#       not reached); E the largest batch's size, L its longest sample
#       (lengths: in the signal's unit; scan: the second dimension of its
#       first tensor of two or more dimensions, or null), I its position
#       in the order the loader would have yielded (from 0), D the median
#       size of the N batches, K how many batches were moved to the front
#       (AUTOBATCH_WORST_CASE_FIRST, default twice AUTOBATCH_GRAD_ACCUM:
#       the largest ones go into the second optimizer step, when the
#       optimizer's state exists, the next largest into the first), S the
#       seconds the planning took, and sizes the largest sizes seen,
#       largest first (at most 8).  Sizes are integers for whole-number
#       lengths, else numbers.  Batches are moved, never dropped nor
#       repeated; later iterations (epochs) are the loader's own;
#   {"ab":"trace","pid":P,"rank":R,"path":"...","events":N}
#       with AUTOBATCH_RECORD set: this process's allocation trace of two
#       training steps is in path (see _Recorder);
#   {"ab":"emulate","pid":P,"device":D,"total":B,"outside":B,"limit":B}
#       with AUTOBATCH_EMULATE_METHOD=probe: device D (of total B) now
#       behaves as one of AUTOBATCH_EMULATE_GPU_MEMORY bytes: PyTorch's
#       allocator may hold `limit` bytes, the emulated size less what the
#       allocator does not hold ("outside": the CUDA context, other
#       processes), measured when CUDA started on it;
#   {"ab":"error","pid":P,"what":"..."}
#       something the probe could not do; the trainer is not affected.
#
# The probe never changes what the trainer computes and never raises into
# it: every hook swallows its own errors.  Standard library only; Python
# 3.7 or later; torch 1.13 through 2.x.

import os
import sys


def _ab_run_shadowed():
    """Run the sitecustomize module that this file shadows, if any."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        try:
            if os.path.abspath(entry or ".") == here:
                continue
            spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        except Exception:
            continue
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # site.py's own behaviour: warn and go on
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                             "%s: %s\n" % (type(e).__name__, e))
        return


class _Probe(object):
    def __init__(self, fd):
        self.fd = fd
        self.pid = os.getpid()
        self.torch = None
        self.primary = None      # the first optimizer that stepped
        self.steps = 0
        self.depth = 0           # nested step() calls count once
        self.rank = None
        self.world = None
        self.bs = None           # batch size of the loader that yielded last
        self.blen = None         # leading dimension of the last batch
        self.batches = 0         # batches fetched since the last step
        self.broken = False
        self.recorder = None     # _Recorder when AUTOBATCH_RECORD is set
        self.vmpeak = False      # report VmPeak with each step
        self.retries_seen = None # the allocator's num_alloc_retries at the last step
        self.ctotal_said = False # the device's CUDA total was reported
        self.optims = []         # weak references to the optimizers made
        self.ended = False       # the failure "mem" line was written (process end)
        # What the model gets (the outermost module's forwards, per step)
        self.model = None        # the module whose forwards count, once found
        self.fw_hooks = []       # global module hooks, until it is found
        self.fw_depth = 0        # module forwards running now (until found)
        self.fw = 0              # its forwards since the last step
        self.seen = 0            # their first tensors' leading dimensions, summed
        self.elems = 0           # the most elements of one first tensor
        self.tok = 0             # first two dimensions' product, summed
        self.fw_blind = False    # a forward had no tensor to read
        # The worst case first
        self.worst_mode = "auto"
        self.worst_scan_s = 30.0
        self.worst_hold = 64 << 20
        self.worst_first = None  # batches moved to the front; None: 2 x accumulation

    # ------------------------------------------------------------ output

    def emit(self, text):
        if self.broken:
            return
        if os.getpid() != self.pid:   # a forked child (DataLoader worker)
            self.pid = os.getpid()
            self.primary = None
            self.steps = 0
        try:
            os.write(self.fd, (text + "\n").encode("utf-8", "replace"))
        except OSError as e:
            self.broken = True
            try:
                sys.stderr.write("autobatch probe: cannot write its report (%s); "
                                 "steps are read from the output instead\n" % e)
            except Exception:
                pass

    def error(self, what):
        self.emit('{"ab":"error","pid":%d,"what":%s}' % (os.getpid(), _json_str(what)))

    # ------------------------------------------------------------ facts

    def where(self):
        """(rank, world) from torch.distributed once it is up, else the
        launcher's environment."""
        if self.world is not None:
            return self.rank, self.world
        rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
        try:
            dist = self.torch.distributed
            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
                self.rank, self.world = rank, world   # fixed from now on
        except Exception:
            pass
        return (rank if rank is not None else 0), (world if world is not None else 1)

    def memory(self):
        """Peak bytes reserved and allocated since the last step, then reset;
        and the bytes allocated now, at the step's end (weights, gradients,
        optimizer state: what the next step starts from).  Then the step's
        allocator retries, the memory outside the allocator now, and the
        device's CUDA total on the first CUDA step (else None)."""
        try:
            cuda = self.torch.cuda
            if not cuda.is_initialized():
                return None, None, None, None, None, None
            dev = cuda.current_device()
            res = cuda.max_memory_reserved(dev)
            alloc = cuda.max_memory_allocated(dev)
            held = cuda.memory_allocated(dev)
            cuda.reset_peak_memory_stats(dev)
        except Exception:
            return None, None, None, None, None, None
        retries = outside = ctotal = None
        try:
            n = cuda.memory_stats(dev).get("num_alloc_retries")
            if n is not None:
                last = self.retries_seen
                retries = max(0, int(n) - last) if last is not None else int(n)
                self.retries_seen = int(n)
        except Exception:
            pass
        try:
            free, total = cuda.mem_get_info(dev)
            outside = max(0, int(total) - int(free) - int(cuda.memory_reserved(dev)))
            if not self.ctotal_said:
                self.ctotal_said = True
                ctotal = int(total)
        except Exception:
            pass
        return res, alloc, held, retries, outside, ctotal

    # ------------------------------------------------------------ hooks

    def step_begin(self, opt):
        self.depth += 1

    def step_end(self, opt):
        self.depth -= 1
        if self.depth > 0:
            return
        self.depth = 0
        if self.steps < 2:
            _safe(self.note_optimizer, opt)
        if self.primary is None:
            self.primary = id(opt)
        elif id(opt) != self.primary:
            return   # a second optimizer of the same iteration (GANs)
        t = _monotonic()
        self.steps += 1
        rank, world = self.where()
        res, alloc, held, retries, outside, ctotal = self.memory()
        vm = _vm_kb("VmPeak") if self.vmpeak else None
        if self.steps == 2:
            # Before the step line: a memory-only trial may be killed at
            # once after its second step's line.
            _safe(self.breakdown, opt, rank, res, alloc, held, outside)
        known = self.fw > 0 and not self.fw_blind
        self.emit('{"ab":"step","pid":%d,"rank":%d,"world":%d,"step":%d,"t":%.6f,'
                  '"res":%s,"alloc":%s,"held":%s,"bs":%s,"blen":%s,"nb":%d,"vm":%s,'
                  '"seen":%s,"fw":%d,"elems":%s,"tok":%s,"retries":%s,"outside":%s,"ctotal":%s}'
                  % (self.pid, rank, world, self.steps, t, _num(res), _num(alloc), _num(held),
                     _num(self.bs), _num(self.blen), self.batches, _num(vm),
                     _num(self.seen if known else None), self.fw if known else 0,
                     _num(self.elems if known else None), _num(self.tok if known else None),
                     _num(retries), _num(outside), _num(ctotal)))
        self.batches = 0
        self.fw = self.seen = self.elems = self.tok = 0
        self.fw_blind = False
        self.fw_depth = 0   # a forward that raised never ran its end hook
        if self.model is None and self.steps >= 3:
            self.forget_forwards()   # no trainable module found: stop looking
        if self.recorder is not None:
            self.recorder.step(self, rank, world)

    def breakdown(self, opt, rank, res, alloc, held, outside):
        """The "mem" line, once per process, at the end of its second
        optimizer step (the first that starts with the optimizer's
        state): the bytes of the parameters, their gradients and the
        optimizer's state on the parameters' device, and the figures of
        the same step from memory() (not read again: the peaks were
        reset)."""
        params, grads, state = self.param_tensors([opt])
        if not params:
            return
        dev = params[0].device
        cuda = dev.type == "cuda"
        self.emit('{"ab":"mem","pid":%d,"rank":%d,"step":%d,"device":"%s","params":%d,'
                  '"grads":%d,"optim":%d,"peak_alloc":%s,"peak_res":%s,"held":%s,"outside":%s}'
                  % (self.pid, rank, self.steps, "cuda" if cuda else "cpu" if dev.type == "cpu"
                     else "other", _storage_bytes(params, dev), _storage_bytes(grads, dev),
                     _storage_bytes(state, dev), _num(alloc if cuda else None),
                     _num(res if cuda else None), _num(held if cuda else None),
                     _num(outside if cuda else None)))

    def param_tensors(self, opts):
        """The distinct parameters of the optimizers' param_groups and of
        the outermost module, their gradients, and the tensors in the
        optimizers' state (the "mem" lines count their storages)."""
        tensor = self.torch.Tensor
        params, seen, state = [], set(), []
        sources = [p for o in opts for g in (getattr(o, "param_groups", None) or [])
                   for p in (g.get("params") or [])]
        if self.model is not None:
            try:
                sources.extend(self.model.parameters())
            except Exception:
                pass
        for p in sources:
            if isinstance(p, tensor) and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        grads = [p.grad for p in params if getattr(p, "grad", None) is not None]
        for o in opts:
            try:
                for st in o.state.values():
                    if isinstance(st, dict):
                        state.extend(v for v in st.values() if isinstance(v, tensor))
            except Exception:
                pass
        return params, grads, state

    def note_optimizer(self, opt):
        """Remember an optimizer (weakly; a few at most), for the failure
        line: one that fails before its first step is seen only here."""
        import weakref
        if len(self.optims) >= 16 or any(r() is opt for r in self.optims):
            return
        self.optims.append(weakref.ref(opt))

    def failure(self, end=True):
        """The "mem" line of a process that ends (end) or whose thread
        died (not end) before its second optimizer step: what the
        parameters, gradients and optimizer state took then, and what
        the gradients and optimizer state take once allocated."""
        if self.ended or self.torch is None:
            return
        if end:
            self.ended = True
        steps = self.steps if os.getpid() == self.pid else 0
        if steps >= 2:
            return   # its second step's line says it
        opts = [o for o in (r() for r in self.optims) if o is not None]
        params, grads, state = self.param_tensors(opts)
        if not params:
            return
        dev = params[0].device
        cuda = dev.type == "cuda"
        want = sum(_tensor_bytes(p, cuda) for p in params
                   if p.device == dev and getattr(p, "requires_grad", False))
        names, expected = _optim_expected(self.torch, opts, dev)
        rank, _ = self.where()
        res, alloc, held, _, outside, _ = self.memory()
        self.emit('{"ab":"mem","pid":%d,"rank":%d,"step":%d,"at":"failure","device":"%s",'
                  '"params":%d,"grads":%d,"optim":%d,"grads_expected":%d,"optim_class":%s,'
                  '"optim_expected":%s,"peak_alloc":%s,"peak_res":%s,"held":%s,"outside":%s}'
                  % (os.getpid(), rank, steps, "cuda" if cuda else "cpu" if dev.type == "cpu"
                     else "other", _storage_bytes(params, dev), _storage_bytes(grads, dev),
                     _storage_bytes(state, dev), want,
                     "null" if not names else _json_str("+".join(names)), _num(expected),
                     _num(alloc if cuda else None), _num(res if cuda else None),
                     _num(held if cuda else None), _num(outside if cuda else None)))

    def batch(self, it, b):
        self.batches += 1
        self.bs = getattr(it, "_autobatch_bs", None)
        self.blen = _leading_dim(b)

    # ------------------------------------------------------------ forwards

    def watch_forwards(self, torch):
        """Global module hooks until the outermost trainable module's first
        forward; then one hook on that module alone (cheap: one call per
        forward of the model, none per submodule)."""
        mod = torch.nn.modules.module
        if not hasattr(mod, "register_module_forward_pre_hook"):
            return
        self.fw_hooks.append(mod.register_module_forward_pre_hook(
            lambda m, args: _safe(self.any_forward, m, args)))

        def after(m, args, out):
            self.fw_depth = max(0, self.fw_depth - 1)
        try:
            h = mod.register_module_forward_hook(after, always_call=True)
        except TypeError:   # torch < 2.1: a forward that raises leaves depth up
            h = mod.register_module_forward_hook(after)   # until the next step
        self.fw_hooks.append(h)

    def forget_forwards(self):
        hooks, self.fw_hooks = self.fw_hooks, []
        for h in hooks:
            try:
                h.remove()
            except Exception:
                pass

    def any_forward(self, m, args):
        if self.fw_depth == 0 and self.model is None and _trainable(m):
            self.adopt(m)
            self.forward(args, _call_kwargs(m, args, self.torch.Tensor))
            return
        self.fw_depth += 1

    def adopt(self, m):
        self.model = m
        self.forget_forwards()

        def pre_kw(mod, args, kwargs):
            _safe(self.forward, args, kwargs)
            return None

        def pre(mod, args):
            _safe(lambda: self.forward(args, _call_kwargs(mod, args, self.torch.Tensor)))
            return None
        try:
            m.register_forward_pre_hook(pre_kw, with_kwargs=True)
        except TypeError:   # torch < 2.0: the hook sees positional arguments only
            m.register_forward_pre_hook(pre)

    def forward(self, args, kwargs):
        self.fw += 1
        tensor = self.torch.Tensor
        t = _first_tensor(args, tensor)
        if t is None and kwargs:
            t = _first_tensor(list(kwargs.values()), tensor)
        shape = getattr(t, "shape", None)
        if shape is None or len(shape) == 0:
            self.fw_blind = True
            return
        n = int(shape[0])
        self.seen += n
        self.tok += n * int(shape[1]) if len(shape) > 1 else n
        e = int(t.numel())
        if e > self.elems:
            self.elems = e

    # ------------------------------------------------------------ worst case

    def worst_begin(self, it, loader):
        """A DataLoader iterator was made: plan its worst case first when it
        is the loader's first iteration and training has not stepped yet."""
        if self.steps > 0 or os.getpid() != self.pid or loader.__dict__.get("_autobatch_planned"):
            return
        loader.__dict__["_autobatch_planned"] = True
        if self.worst_mode == "off":
            self.worst_emit(_WorstReport("off"))
            return
        iterable = isinstance(loader.dataset, self.torch.utils.data.IterableDataset)
        if self.worst_mode == "auto" and not iterable:
            sig = _length_signal(loader)
            if sig is not None:
                rep = _plan_lengths(self, it, sig)
                if rep is not None:
                    self.worst_emit(rep)
                    return
        it._autobatch_front = _Front()   # scanned at the first batch asked for

    def worst_first_n(self):
        if self.worst_first is not None:
            return self.worst_first
        return 2 * max(1, _env_int("AUTOBATCH_GRAD_ACCUM") or 1)

    def worst_emit(self, rep):
        rank, _ = self.where()
        self.emit('{"ab":"worst","pid":%d,"rank":%d,"mode":"%s","signal":%s,"batches_seen":%d,'
                  '"whole":%s,"elems":%s,"longest":%s,"position":%s,"median":%s,"first":%d,'
                  '"scan_s":%.3f,"sizes":[%s]}'
                  % (os.getpid(), rank, rep.mode,
                     "null" if rep.signal is None else _json_str(rep.signal), rep.seen,
                     "true" if rep.whole else "false", _size(rep.elems), _size(rep.longest),
                     _num(rep.position), _size(rep.median), rep.first, rep.secs,
                     ",".join(_size(x) for x in rep.sizes)))

    def front_next(self, it, orig_next):
        """__next__ of an iterator whose first batches are the largest ones
        its loader yields within the scan's bounds."""
        q = it._autobatch_front
        if q.pending:
            q.pending = False
            self.scan(it, orig_next, q)
        if q.buf:
            return q.buf.popleft()
        it._autobatch_front = None
        if q.exc is not None:
            exc, q.exc = q.exc, None
            raise exc
        if q.end:
            raise StopIteration
        return orig_next(it)

    def scan(self, it, orig_next, q):
        """Take the loader's batches until the time or room runs out or the
        loader ends; they go out again, the largest first.  Whatever goes
        wrong here, every batch taken goes out."""
        import collections
        t0 = _monotonic()
        deadline = t0 + self.worst_scan_s
        items, keys, longest, held = [], [], [], 0
        q.buf = collections.deque()
        try:
            while True:
                try:
                    b = orig_next(it)
                except StopIteration:
                    q.end = True
                    break
                except Exception as e:   # the trainer's own error: raised after the batches
                    q.exc = e
                    break
                items.append(b)
                elems, lg, nbytes = _batch_elems(b, self.torch.Tensor)
                keys.append(elems)
                longest.append(lg)
                held += nbytes
                if _monotonic() >= deadline or held >= self.worst_hold:
                    break
            accum = max(1, _env_int("AUTOBATCH_GRAD_ACCUM") or 1)
            order = _front_order(keys, self.worst_first_n(), accum)
            rep = _report("scan", None, keys, longest, q.end and q.exc is None,
                          self.worst_first_n(), _monotonic() - t0)
        except Exception as e:
            self.error("worst case scan: %s" % e)
            order, rep = range(len(items)), None
        q.buf.extend(items[i] for i in order)
        del items
        if rep is not None:
            self.worst_emit(rep)

class _Recorder(object):
    """The allocation trace of two training steps, for autobatch's replay
    model (probes/replay.h): with AUTOBATCH_RECORD=DIR, after the
    AUTOBATCH_RECORD_AFTER-th optimizer step (default 2: the optimizer's
    state exists and the steady peak was reached, so VmPeak then is the
    step's) every allocation and free is recorded for three more steps,
    then DIR/trace-PID.txt is written with the last two (the first step of
    a recording misses the frees of what was allocated before it started).

    On CUDA with torch 2.1 or later, the caching allocator's own memory
    history records them (torch.cuda.memory._record_memory_history, no
    stacks, unlimited entries: requested sizes, addresses, streams), and a
    snapshot taken when recording starts gives the layout the steps start
    from (its segments and blocks).  Elsewhere (the CPU, torch 1.13 and
    2.0) torch.profiler with profile_memory records them (CPU and CUDA
    allocations, in one form).

      autobatch-trace 1
      pid P
      rank R
      world W
      torch VERSION
      recorder history|profiler
      vm_peak_kb K          (/proc/self/status VmPeak before recording)
      vm_size_kb K          (VmSize when recording started)
      cuda_reserved B       (caching allocator, when recording started; -1 off CUDA)
      cuda_allocated B
      cuda_outside B        (device memory outside the allocator: total - free - reserved)
      cuda_total B          (torch.cuda.mem_get_info: CUDA's view of the card)
      cuda_free B
      alloc_conf CONF       (PYTORCH_CUDA_ALLOC_CONF, when set)
      backend NAME          (native or cudaMallocAsync)
      segment ADDR SIZE s|l (the layout at the start, memory history only:
      block ADDR SIZE a|f    each segment, then its blocks, allocated or free)
      cuda_reserved_end B   (after the recorded steps)
      cuda_allocated_end B
      streams N             (streams the recorded steps allocated on; history only)
      step 1
      a DEV SIZE ADDR       (an allocation; DEV c for CPU, g for a GPU)
      f DEV SIZE ADDR       (a free)
      step 2
      ...
      end N                 (N events: a file without it was cut short)

    The header also has record_step_s (the three recorded steps' seconds)
    and write_s (building and writing the trace).  More than
    AUTOBATCH_RECORD_MAX events (default 2,000,000, about 60 MB) are not
    written: the file then says `truncated N`, which autobatch refuses.

    Events are in time order and split at the optimizer steps' ends.  The
    recorder's own cost lands only on those steps."""

    def __init__(self, directory, after, cap):
        self.dir = directory
        self.after = after
        self.cap = cap
        self.prof = None
        self.history = None      # the CUDA device whose memory history is on
        self.marks = []
        self.counts = []         # (allocations, frees) so far at each mark, with history
        self.head = None
        self.done = False

    def step(self, probe, rank, world):
        if self.done or probe.steps < self.after:
            return
        import time
        if self.prof is None and self.history is None:
            self.head = self.header(probe, rank, world)
            if not self.start_history(probe):
                from torch.profiler import profile, ProfilerActivity
                self.head.insert(5, "recorder profiler")
                self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
                self.prof.start()
            self.marks = [time.time_ns()]
            self.counts = [self.alloc_counts(probe)]
            return
        self.marks.append(time.time_ns())
        self.counts.append(self.alloc_counts(probe))
        if len(self.marks) < 4:
            return
        self.done = True
        path = os.path.join(self.dir, "trace-%d.txt" % os.getpid())
        if self.history is not None:
            events = self.stop_history(probe)
        else:
            prof, self.prof = self.prof, None
            prof.stop()
            events = None
        self.head.extend(self.end_figures(probe))
        self.head.append("record_step_s %s" % " ".join(
            "%.6f" % ((b - a) / 1e9) for a, b in zip(self.marks, self.marks[1:])))
        t0 = time.time_ns()
        if events is None:
            events = self.profiler_events(prof)
        n = self.write(events, path, t0)
        probe.emit('{"ab":"trace","pid":%d,"rank":%d,"path":%s,"events":%d}'
                   % (os.getpid(), rank, _json_str(path), n))

    def start_history(self, probe):
        """Memory history on, with the layout the steps start from in the
        header; False where it cannot be had (no CUDA, torch < 2.1)."""
        try:
            cuda = probe.torch.cuda
            mem = getattr(cuda, "memory", None)
            if not cuda.is_initialized() or not hasattr(mem, "_record_memory_history"):
                return False
            dev = cuda.current_device()
            snap = mem._snapshot()
            # torch 1.13/2.0 take (enabled, device) and keep no ordered trace
            mem._record_memory_history(enabled="all", context=None, stacks="python",
                                       max_entries=sys.maxsize, device=dev)
        except Exception:
            return False
        self.history = dev
        self.head.insert(5, "recorder history")
        for seg in snap.get("segments", []) if isinstance(snap, dict) else snap:
            if seg.get("device", dev) != dev:
                continue
            addr = int(seg["address"])
            kind = "s" if seg.get("segment_type") == "small" else "l"
            self.head.append("segment %d %d %s" % (addr, int(seg["total_size"]), kind))
            for blk in seg.get("blocks", []):
                size = int(blk["size"])
                live = str(blk.get("state", "")).startswith("active")
                self.head.append("block %d %d %s" % (addr, size, "a" if live else "f"))
                addr += size
        return True

    def stop_history(self, probe):
        """The recorded allocations and frees, and memory history off."""
        mem = probe.torch.cuda.memory
        snap = mem._snapshot()
        try:
            mem._record_memory_history(enabled=None, device=self.history)
        except Exception:
            pass
        traces = snap.get("device_traces", [])
        trace = traces[self.history] if self.history < len(traces) else []
        # The steps' ends: where the allocator's own counts of allocations
        # and frees were at each mark; its clock where they disagree.
        c = self.counts
        by_count = None not in c and all(
            a >= c[0][0] and f >= c[0][1] for a, f in c)
        if by_count:
            na = sum(1 for e in trace if e.get("action") == "alloc")
            nf = sum(1 for e in trace if e.get("action") == "free_requested")
            by_count = (na, nf) == (c[3][0] - c[0][0], c[3][1] - c[0][1])
        events, streams, sizes = [], set(), {}
        k = na = nf = 0
        for e in trace:
            act = e.get("action")
            if act == "alloc":
                na += 1
            elif act == "free_requested":
                nf += 1
            # a step ends at the allocator's count; a free completes in its own
            while by_count and k < 3 and act in ("alloc", "free_requested") and (
                    na - (act == "alloc") >= c[k + 1][0] - c[0][0] and
                    nf - (act == "free_requested") >= c[k + 1][1] - c[0][1]):
                k += 1
            addr = int(e.get("addr", 0))
            if act == "alloc":
                size = int(e["size"])
                sizes[addr] = size
                streams.add(e.get("stream", 0))
            elif act == "free_completed":
                size = -sizes.pop(addr, int(e["size"]))
            else:
                continue
            t = self.marks[min(k, 2)] if by_count else int(e.get("time_us", 0)) * 1000
            events.append((t, size, "g", addr))
        self.head.append("streams %d" % len(streams))
        self.head.append("steps_by %s" % ("count" if by_count else "clock"))
        return events

    def alloc_counts(self, probe):
        """The caching allocator's allocations and frees so far (history only)."""
        if self.history is None:
            return None
        try:
            st = probe.torch.cuda.memory_stats(self.history)
            return (int(st["allocation.all.allocated"]), int(st["allocation.all.freed"]))
        except Exception:
            return None

    def profiler_events(self, prof):
        events = []
        stack = list(prof.profiler.kineto_results.experimental_event_tree())
        while stack:
            node = stack.pop()
            ef = node.extra_fields
            if type(ef).__name__.endswith("Allocation"):
                dev = "g" if "cuda" in str(getattr(ef, "device_type", "")).lower() else "c"
                events.append((node.start_time_ns, ef.alloc_size, dev, ef.ptr))
            stack.extend(node.children)
        events.sort(key=lambda e: e[0])
        return events

    def header(self, probe, rank, world):
        res = alloc = outside = free = total = -1
        conf = backend = None
        try:
            cuda = probe.torch.cuda
            if cuda.is_initialized():
                dev = cuda.current_device()
                res = cuda.memory_reserved(dev)
                alloc = cuda.memory_allocated(dev)
                free, total = cuda.mem_get_info(dev)
                outside = total - free - res
                conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get(
                    "PYTORCH_ALLOC_CONF")
                get = getattr(cuda, "get_allocator_backend", None)
                backend = get() if get else "native"
        except Exception:
            pass
        head = ["autobatch-trace 1", "pid %d" % os.getpid(), "rank %d" % rank,
                "world %d" % world,
                "torch %s" % getattr(probe.torch, "__version__", "?").split()[0],
                "vm_peak_kb %d" % (_vm_kb("VmPeak") or -1), "vm_size_kb %d" % (_vm_kb("VmSize") or -1),
                "cuda_reserved %d" % res, "cuda_allocated %d" % alloc,
                "cuda_outside %d" % outside, "cuda_total %d" % total, "cuda_free %d" % free]
        if conf:
            head.append("alloc_conf %s" % " ".join(str(conf).split())[:250])
        if backend:
            head.append("backend %s" % backend)
        return head

    def end_figures(self, probe):
        try:
            cuda = probe.torch.cuda
            if cuda.is_initialized():
                dev = cuda.current_device()
                return ["cuda_reserved_end %d" % cuda.memory_reserved(dev),
                        "cuda_allocated_end %d" % cuda.memory_allocated(dev)]
        except Exception:
            pass
        return []

    def write(self, events, path, t0):
        lines = list(self.head)
        if len(events) > self.cap:
            lines.append("truncated %d" % len(events))
            events = []
        k = n = 0
        for t, size, dev, ptr in events:
            if t < self.marks[1]:
                continue
            while k < 2 and (k == 0 or t >= self.marks[k + 1]):
                k += 1
                lines.append("step %d" % k)
            lines.append("%s %s %d %d" % ("a" if size >= 0 else "f", dev, abs(size), ptr))
            n += 1
        while k < 2:
            k += 1
            lines.append("step %d" % k)
        import time
        lines.insert(len(self.head), "write_s %.6f" % ((time.time_ns() - t0) / 1e9))
        lines.append("end %d" % n)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(tmp, path)
        return n


def _vm_kb(key):
    """A figure of /proc/self/status in kB (VmPeak, VmSize), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == key:
                    return int(v.split()[0])
    except Exception:
        pass
    return None


def _storage_bytes(tensors, dev):
    """Bytes of the distinct storages under tensors on device dev (views
    of one buffer count once, as the allocator holds it once); on CUDA
    each as the caching allocator counts it, rounded up to its 512-byte
    blocks (a model of many small tensors would otherwise look smaller
    than memory_allocated() says)."""
    total, seen = 0, set()
    cuda = dev.type == "cuda"
    for t in tensors:
        try:
            if t.device != dev:
                continue
            try:
                s = t.untyped_storage()        # torch >= 2.0
            except AttributeError:
                s = t.storage()                # torch 1.13: a TypedStorage
            key, n = s.data_ptr(), s.nbytes()
        except Exception:
            key, n = t.data_ptr(), t.numel() * t.element_size()
        if n and key in seen:
            continue
        seen.add(key)
        n = int(n)
        total += (n + 511) // 512 * 512 if cuda else n
    return total


def _tensor_bytes(t, cuda):
    """Bytes of a tensor of t's shape and dtype made afresh (zeros_like):
    on CUDA as the caching allocator counts it (512-byte blocks)."""
    n = int(t.numel()) * int(t.element_size())
    return (n + 511) // 512 * 512 if cuda else n


def _optim_expected(torch, opts, dev):
    """(class names, bytes on dev that the optimizers' state takes once
    allocated); the bytes are None unless every optimizer is one of
    torch's own classes whose state is known (docs/probe.md)."""
    names, total = [], 0
    cuda = dev.type == "cuda"
    major = _leading_int(getattr(torch, "__version__", "0"))
    step_bytes = 8 if torch.get_default_dtype() == torch.float64 else 4
    for o in opts:
        cls = type(o)
        if cls.__name__ not in names:
            names.append(cls.__name__)
        if total is None:
            continue
        for g in getattr(o, "param_groups", None) or []:
            on_dev = dev.type == "cpu" or bool(g.get("capturable")) or bool(g.get("fused"))
            if cls is torch.optim.Adam or cls is torch.optim.AdamW:
                copies, step = (3 if g.get("amsgrad") else 2), True
            elif cls is torch.optim.SGD:
                copies, step = (1 if g.get("momentum") else 0), False
            elif cls is torch.optim.Adagrad:   # made in __init__, frozen ones too
                copies, step = 1, True
            elif cls is torch.optim.RMSprop:   # its step is a tensor from 2.0 on
                copies = 1 + (1 if g.get("momentum") else 0) + (1 if g.get("centered") else 0)
                step = major >= 2
            else:
                total = None
                break
            for p in g.get("params") or []:
                if not isinstance(p, torch.Tensor) or p.device != dev or (
                        not p.requires_grad and cls is not torch.optim.Adagrad):
                    continue
                total += copies * _tensor_bytes(p, cuda)
                if step and on_dev:
                    total += (step_bytes + 511) // 512 * 512 if cuda else step_bytes
    return names, total


def _leading_int(text):
    """The leading number of a version string ("2.8.0+cu128": 2)."""
    digits = ""
    for c in str(text):
        if not c.isdigit():
            break
        digits += c
    return int(digits) if digits else 0


def _monotonic():
    import time
    return time.monotonic()


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _env_seconds(name):
    """A duration: seconds, or with an s, m or h suffix; None if unset or bad."""
    v = os.environ.get(name, "").strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(v[-1:], None)
    try:
        x = float(v[:-1]) * scale if scale else float(v)
    except ValueError:
        return None
    return x if x >= 0 else None


def _num(v):
    return "null" if v is None else "%d" % v


def _json_str(s):
    import json
    return json.dumps(str(s)[:300])


def _leading_dim(b):
    """The batch's size along its first axis, for a tensor, a dict or a
    sequence of them; None when it cannot be told cheaply."""
    for _ in range(3):
        shape = getattr(b, "shape", None)
        if shape is not None:
            try:
                return int(shape[0]) if len(shape) else None
            except Exception:
                return None
        if isinstance(b, dict):
            if not b:
                return None
            b = next(iter(b.values()))
        elif isinstance(b, (list, tuple)):
            if not b:
                return None
            b = b[0]
        else:
            return None
    return None


def _loader_batch_size(loader):
    bs = getattr(loader, "batch_size", None)
    if not isinstance(bs, int):
        bs = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
    return bs if isinstance(bs, int) and not isinstance(bs, bool) else None


def _trainable(m):
    """The module has a parameter that trains (a model, not a loss or a
    frozen feature extractor)."""
    for p in m.parameters():
        if p.requires_grad:
            return True
    return False


def _first_tensor(x, tensor, depth=3):
    """x itself when a tensor, else the first tensor inside a dict, list or
    tuple (a few levels down, a few entries each)."""
    if isinstance(x, tensor):
        return x
    if depth <= 0:
        return None
    if isinstance(x, (list, tuple)):
        vals = x[:16]
    else:
        values = getattr(x, "values", None)   # dict, BatchEncoding, UserDict
        if values is None or not callable(values) or isinstance(x, type):
            return None
        try:
            vals = list(values())[:16]
        except Exception:
            return None
    for v in vals:
        t = _first_tensor(v, tensor, depth - 1)
        if t is not None:
            return t
    return None


def _call_kwargs(m, args, tensor):
    """The keyword arguments of module m's call now running, when its
    positional ones hold no tensor and the hook could not be given them
    (torch < 2.0, global hooks): read from the frame of Module.__call__."""
    if _first_tensor(args, tensor) is not None:
        return None
    try:
        f = sys._getframe(2)
        for _ in range(8):
            if f is None:
                return None
            loc = f.f_locals
            if loc.get("self") is m and isinstance(loc.get("kwargs"), dict):
                return loc["kwargs"]
            f = f.f_back
    except Exception:
        pass
    return None


def _batch_tensors(x, tensor, out, depth=3):
    if isinstance(x, tensor):
        out.append(x)
    elif depth > 0 and len(out) < 64:
        if isinstance(x, (list, tuple)):
            vals = x[:64]
        else:
            values = getattr(x, "values", None)
            if values is None or not callable(values) or isinstance(x, type):
                return
            try:
                vals = list(values())[:64]
            except Exception:
                return
        for v in vals:
            _batch_tensors(v, tensor, out, depth - 1)


def _batch_elems(b, tensor):
    """A batch's tensors' total elements, the second dimension of its first
    tensor of two or more dimensions (None if none), and its bytes."""
    ts = []
    _batch_tensors(b, tensor, ts)
    elems = nbytes = 0
    longest = None
    for t in ts:
        n = int(t.numel())
        elems += n
        nbytes += n * t.element_size()
        if longest is None and t.dim() >= 2:
            longest = int(t.shape[1])
    return elems, longest, nbytes


class _WorstReport(object):
    def __init__(self, mode):
        self.mode = mode
        self.signal = None
        self.seen = 0
        self.whole = False
        self.elems = self.longest = self.position = self.median = None
        self.first = 0
        self.secs = 0.0
        self.sizes = []


class _Front(object):
    """The scanned batches of one iterator, to yield before the rest."""

    def __init__(self):
        self.pending = True
        self.buf = None
        self.end = False
        self.exc = None


class _Planned(object):
    """An index sampler for one iteration: the planned batches (the largest
    first), then the rest of the real sampler's iterator.  Iterated again
    (a persistent-workers loader's next epoch) it is the real sampler."""

    def __init__(self, order, rest, real):
        self.order = order
        self.rest = rest
        self.real = real
        self.used = False

    def __iter__(self):
        if self.used:
            return iter(self.real)
        return self._gen()

    def _gen(self):
        self.used = True   # runs at the first batch taken, not when made
        for x in self.order:
            yield x
        self.order = []
        if self.rest is not None:
            for x in self.rest:
                yield x

    def __len__(self):
        return len(self.real)


def _size(v):
    if v is None:
        return "null"
    if isinstance(v, int) or float(v).is_integer():
        return "%d" % int(v)
    return "%.6g" % v


def _front_order(keys, first, accum):
    """Positions in the order to yield them: the `first` largest (the
    largest `accum` second, the next `accum` first, the rest largest
    first), then everything else in its own order."""
    import heapq
    top = heapq.nlargest(min(first, len(keys)), range(len(keys)), key=keys.__getitem__)
    if len(top) >= 2 * accum:
        top = top[accum:2 * accum] + top[:accum] + top[2 * accum:]
    front = set(top)
    return top + [i for i in range(len(keys)) if i not in front]


def _report(mode, signal, keys, longest, whole, first, secs):
    rep = _WorstReport(mode)
    rep.signal = signal
    rep.seen = len(keys)
    rep.whole = bool(whole)
    rep.first = min(first, len(keys))
    rep.secs = secs
    if keys:
        import heapq
        i = max(range(len(keys)), key=lambda k: (keys[k], -k))
        rep.elems, rep.longest, rep.position = keys[i], longest[i], i
        rep.median = sorted(keys)[len(keys) // 2]
        rep.sizes = heapq.nlargest(8, keys)
    return rep


_LENGTH_ATTRS = ("lengths", "durations", "sizes")
_LENGTH_COLUMNS = ("length", "lengths", "duration", "durations", "input_length",
                   "input_lengths", "audio_length", "num_frames", "n_frames", "frame_len")


def _as_list(v, n):
    """v as a list of n numbers, or None."""
    if v is None or isinstance(v, (str, bytes, dict)):
        return None
    try:
        if hasattr(v, "tolist"):
            v = v.tolist()
        if len(v) != n or not n:
            return None
        if not isinstance(v, list):
            v = list(v)
        x = v[0]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return None
        return v
    except Exception:
        return None


def _dataset_signal(ds, where, depth=2):
    """(name, lengths by index) of a dataset, or None."""
    try:
        n = len(ds)
    except Exception:
        return None
    for attr in _LENGTH_ATTRS:
        try:
            v = _as_list(getattr(ds, attr, None), n)
        except Exception:
            v = None
        if v is not None:
            return "%s.%s" % (where, attr), v
    cols = getattr(ds, "column_names", None)   # a Hugging Face datasets.Dataset
    if isinstance(cols, list):
        for c in _LENGTH_COLUMNS:
            if c in cols:
                try:
                    v = _as_list(ds[c], n)
                except Exception:
                    v = None
                if v is not None:
                    return "%s.column:%s" % (where, c), v
    # Coqui's TTSDataset: a dict per sample with its "audio_length" (its own
    # `lengths` property raises on those dicts in coqui-tts 0.27)
    items = getattr(ds, "samples", None)
    if isinstance(items, list) and len(items) == n and n and isinstance(items[0], dict):
        for c in _LENGTH_COLUMNS:
            if c in items[0]:
                try:
                    v = _as_list([s[c] for s in items], n)
                except Exception:
                    v = None
                if v is not None:
                    return "%s.samples[].%s" % (where, c), v
    indices = getattr(ds, "indices", None)   # torch.utils.data.Subset
    inner = getattr(ds, "dataset", None)
    if depth > 0 and inner is not None and indices is not None:
        sig = _dataset_signal(inner, where + ".dataset", depth - 1)
        if sig is not None:
            try:
                return sig[0], [sig[1][int(i)] for i in indices]
            except Exception:
                return None
    fl = getattr(ds, "get_frame_len", None)   # F5-TTS's datasets
    if callable(fl):
        return "%s.get_frame_len" % where, fl
    return None


def _length_signal(loader):
    """Where the loader's samples' lengths can be read without loading
    them: (name, lengths indexed by dataset index or a function of it)."""
    ds = loader.dataset
    try:
        n = len(ds)
    except Exception:
        return None
    bs = getattr(loader, "batch_sampler", None)
    for obj, where in ((getattr(loader, "sampler", None), "sampler"), (bs, "batch_sampler"),
                       (getattr(bs, "sampler", None), "batch_sampler.sampler")):
        if obj is None:
            continue
        for attr in _LENGTH_ATTRS:
            try:
                v = _as_list(getattr(obj, attr, None), n)
            except Exception:
                v = None
            if v is not None:
                return "%s.%s" % (where, attr), v
    return _dataset_signal(ds, "dataset")


def _plan_lengths(probe, it, sig):
    """Reorder the iterator's index lists (batches of dataset indices) so
    that the largest come first, before any data is loaded.  Takes the
    lists from the iterator's own sampler iterator (the sampler is not
    iterated a second time); bounded by the scan time.  None: not a
    sampler of indices (nothing taken)."""
    name, lengths = sig
    get = lengths if callable(lengths) else lengths.__getitem__
    real = getattr(it, "_index_sampler", None)
    src = getattr(it, "_sampler_iter", None)
    if real is None or src is None:
        return None
    try:
        total = len(real)
    except Exception:
        total = None
    t0 = _monotonic()
    deadline = t0 + probe.worst_scan_s
    items, keys, longest = [], [], []
    whole = False
    bad = None
    while True:
        if total is not None and len(items) >= total:
            whole = True
            break
        try:
            idx = next(src)
        except StopIteration:
            whole = True
            src = None
            break
        items.append(idx)
        try:
            ids = [int(idx)] if isinstance(idx, int) or not hasattr(idx, "__iter__") else [int(i) for i in idx]
            ls = [get(i) for i in ids]
            top = max(ls) if ls else 0
            keys.append(top * len(ls))
            longest.append(top)
        except Exception as e:   # not indices, or no length for one: keep the order
            bad = e
            break
        if len(items) % 64 == 0 and _monotonic() >= deadline:
            break
    first = probe.worst_first_n()
    accum = max(1, _env_int("AUTOBATCH_GRAD_ACCUM") or 1)
    if bad is not None:
        order = list(range(len(items)))
        probe.error("worst case: %s does not give a batch's lengths (%s)" % (name, bad))
        rep = _WorstReport("none")
        rep.signal = name
    else:
        order = _front_order(keys, first, accum)
        rep = _report("lengths", name, keys, longest, whole, first, _monotonic() - t0)
    planned = _Planned([items[i] for i in order], src, real)
    it._index_sampler = planned
    it._sampler_iter = iter(planned)
    return rep


def _install(probe, torch):
    if probe.torch is not None:
        return  # once: the finder and the import wrapper may both get here
    probe.torch = torch
    _unwrap_import(probe)
    hook = "none"
    try:
        import importlib
        optmod = importlib.import_module("torch.optim.optimizer")
        if hasattr(optmod, "register_optimizer_step_post_hook"):
            optmod.register_optimizer_step_pre_hook(
                lambda opt, args, kwargs: _safe(probe.step_begin, opt))
            optmod.register_optimizer_step_post_hook(
                lambda opt, args, kwargs: _safe(probe.step_end, opt))
            hook = "global"
        else:
            _wrap_optimizer_classes(probe, torch.optim.Optimizer)
            hook = "wrap"
    except Exception as e:
        probe.error("optimizer hooks: %s" % e)
    try:
        if hook == "global":
            _watch_optimizer_init(probe, torch.optim.Optimizer)
        _watch_failure(probe)
    except Exception as e:
        probe.error("failure hooks: %s" % e)
    try:
        _wrap_dataloader(probe, torch.utils.data)
    except Exception as e:
        probe.error("DataLoader hooks: %s" % e)
    try:
        probe.watch_forwards(torch)
    except Exception as e:
        probe.error("module hooks: %s" % e)
    rank, _ = probe.where()
    probe.emit('{"ab":"torch","pid":%d,"rank":%d,"version":%s,"hook":"%s"}'
               % (os.getpid(), rank, _json_str(getattr(torch, "__version__", "?")), hook))
    if os.environ.get("AUTOBATCH_EMULATE_METHOD") == "probe":
        try:
            _emulate(probe, torch)
        except Exception as e:
            probe.error("emulate: %s" % e)


def _emulate(probe, torch):
    """--emulate-gpu-memory through PyTorch: the caching allocator of each
    device this process uses may hold the emulated size less what a card
    of that size would also have in use outside the allocator (the CUDA
    context, other processes), as a per-process memory fraction.  Set when
    CUDA starts (torch.cuda's queue of calls run at initialisation) and
    when the process moves to another device (torch.cuda.set_device)."""
    size = _env_int("AUTOBATCH_EMULATE_GPU_MEMORY")
    cuda = getattr(torch, "cuda", None)
    if not size or size <= 0 or cuda is None:
        return
    done = set()

    def apply():
        d = cuda.current_device()
        if d in done:
            return
        done.add(d)
        free, total = cuda.mem_get_info(d)
        if size >= total:
            return
        outside = max(0, total - free - cuda.memory_reserved(d))
        limit = max(0, size - outside)
        cuda.set_per_process_memory_fraction(limit / float(total), d)
        probe.emit('{"ab":"emulate","pid":%d,"device":%d,"total":%d,"outside":%d,"limit":%d}'
                   % (os.getpid(), d, total, outside, limit))

    def safe_apply():
        try:
            apply()
        except Exception as e:
            probe.error("emulate: %s" % e)

    orig_set_device = cuda.set_device

    def set_device(device):
        orig_set_device(device)
        if cuda.is_initialized():
            safe_apply()
    cuda.set_device = set_device
    if cuda.is_initialized():
        safe_apply()
    else:
        cuda._lazy_call(safe_apply)


def _safe(fn, *args):
    try:
        fn(*args)
    except Exception:
        pass
    return None


def _wrap_optimizer_classes(probe, base):
    """torch < 2.0 has no global step hooks: wrap `step` of every
    optimizer class when its first instance is made."""
    orig_init = base.__init__

    def wrap_step(cls):
        if cls.__dict__.get("_autobatch_wrapped"):
            return
        step = getattr(cls, "step")

        def step_wrapper(self, *args, **kwargs):
            _safe(probe.step_begin, self)
            try:
                return step(self, *args, **kwargs)
            finally:
                _safe(probe.step_end, self)
        step_wrapper.__wrapped__ = step
        step_wrapper.__name__ = getattr(step, "__name__", "step")
        step_wrapper.__doc__ = getattr(step, "__doc__", None)
        cls.step = step_wrapper
        cls._autobatch_wrapped = True

    def init_wrapper(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        _safe(wrap_step, type(self))
        _safe(probe.note_optimizer, self)
    init_wrapper.__wrapped__ = orig_init
    base.__init__ = init_wrapper


def _watch_optimizer_init(probe, base):
    """Each optimizer made is noted (torch >= 2.0; the wrapper of
    _wrap_optimizer_classes does it before): one that fails before its
    first step is otherwise never seen."""
    orig_init = base.__init__

    def init_wrapper(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        _safe(probe.note_optimizer, self)
    init_wrapper.__wrapped__ = orig_init
    for k in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(init_wrapper, k, getattr(orig_init, k))
        except Exception:
            pass
    base.__init__ = init_wrapper


def _watch_failure(probe):
    """The failure "mem" line: sys.excepthook and threading.excepthook
    chained (the line first, then the hook that was there, which prints
    the traceback as before), and atexit for a trainer that catches its
    error and exits."""
    import atexit
    import threading
    prev = sys.excepthook

    def excepthook(tp, value, tb):
        if not (isinstance(tp, type) and issubclass(tp, KeyboardInterrupt)):
            _safe(probe.failure)
        return prev(tp, value, tb)
    sys.excepthook = excepthook
    prev_thread = getattr(threading, "excepthook", None)
    if prev_thread is not None:   # Python 3.8+
        def thread_hook(args):
            tp = getattr(args, "exc_type", None)
            if not (isinstance(tp, type) and issubclass(tp, (SystemExit, KeyboardInterrupt))):
                _safe(probe.failure, False)
            return prev_thread(args)
        threading.excepthook = thread_hook
    atexit.register(lambda: _safe(probe.failure))


def _wrap_dataloader(probe, data):
    loader_cls = data.DataLoader
    iter_cls = data.dataloader._BaseDataLoaderIter
    orig_iter = loader_cls.__iter__
    orig_next = iter_cls.__next__
    orig_init = iter_cls.__init__

    def init_wrapper(self, loader, *args, **kwargs):
        # The base class's __init__ (each iterator class calls it first)
        # made the sampler's iterator; the worst case is planned on it
        # before a worker process starts or an index is fetched.
        orig_init(self, loader, *args, **kwargs)
        try:
            probe.worst_begin(self, loader)
        except Exception as e:
            probe.error("worst case: %s" % e)
    init_wrapper.__wrapped__ = orig_init

    def iter_wrapper(self):
        it = orig_iter(self)
        try:
            it._autobatch_bs = _loader_batch_size(self)
        except Exception:
            pass
        return it

    def next_wrapper(self):
        if getattr(self, "_autobatch_front", None) is not None:
            b = probe.front_next(self, orig_next)
        else:
            b = orig_next(self)
        try:
            probe.batch(self, b)
        except Exception:
            pass
        return b
    loader_cls.__iter__ = iter_wrapper
    iter_cls.__next__ = next_wrapper
    iter_cls.__init__ = init_wrapper


class _TorchFinder(object):
    """Meta-path finder that sees `import torch` through and then installs
    the probe, once.  Everything else goes to the other finders."""

    def __init__(self, probe):
        self.probe = probe
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        orig_exec = spec.loader.exec_module
        probe = self.probe

        def exec_module(module):
            orig_exec(module)
            try:
                _install(probe, module)
            except Exception as e:
                probe.error("install: %s" % e)
        spec.loader.exec_module = exec_module
        return spec


def _wrap_import(probe):
    """A second way to see torch arrive: another meta-path finder put in
    front of ours (import hooks of typeguard, beartype, ...) can load torch
    without asking ours.  Until the probe is installed, every import
    statement checks whether torch has finished loading; then the wrapper
    takes itself out again."""
    import builtins
    orig = builtins.__import__

    def import_wrapper(name, *args, **kwargs):
        module = orig(name, *args, **kwargs)
        if probe.torch is None:
            t = sys.modules.get("torch")
            spec = getattr(t, "__spec__", None)
            if t is not None and not getattr(spec, "_initializing", False):
                try:
                    _install(probe, t)
                except Exception as e:
                    probe.error("install: %s" % e)
        return module
    probe.import_orig = orig
    probe.import_wrapper = import_wrapper
    builtins.__import__ = import_wrapper


def _unwrap_import(probe):
    import builtins
    wrapper = getattr(probe, "import_wrapper", None)
    if wrapper is not None and builtins.__import__ is wrapper:
        builtins.__import__ = probe.import_orig


def _ab_start():
    path = os.environ.get("AUTOBATCH_PROBE")
    if not path:
        return
    import stat
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        sys.stderr.write("autobatch probe: cannot open its report '%s' (%s); steps are read "
                         "from the output instead\n" % (path, e.strerror))
        return
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        sys.stderr.write("autobatch probe: its report '%s' is not a regular file; steps are "
                         "read from the output instead\n" % path)
        return
    probe = _Probe(fd)
    probe.vmpeak = bool(os.environ.get("AUTOBATCH_VMPEAK"))
    mode = (os.environ.get("AUTOBATCH_WORST_CASE") or "auto").strip().lower()
    probe.worst_mode = mode if mode in ("off", "auto", "scan") else "auto"
    scan = _env_seconds("AUTOBATCH_WORST_CASE_SCAN")
    if scan is not None:
        probe.worst_scan_s = scan
    hold = _env_int("AUTOBATCH_WORST_CASE_HOLD")
    if hold is not None and hold >= 0:
        probe.worst_hold = hold << 20
    first = _env_int("AUTOBATCH_WORST_CASE_FIRST")
    if first is not None and first >= 0:
        probe.worst_first = first
    record = os.environ.get("AUTOBATCH_RECORD")
    if record:
        probe.recorder = _Recorder(record, max(1, _env_int("AUTOBATCH_RECORD_AFTER") or 2),
                                   _env_int("AUTOBATCH_RECORD_MAX") or 2000000)
    if "torch" in sys.modules:
        _install(probe, sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder(probe))
        _wrap_import(probe)


_ab_run_shadowed()
try:
    _ab_start()
except Exception as _e:  # never stop the trainer from starting
    try:
        sys.stderr.write("autobatch probe: not loaded (%s)\n" % _e)
    except Exception:
        pass
