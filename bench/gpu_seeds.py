# SPDX-License-Identifier: MIT
"""The seed users' models on an emulated 24 GB card (issue 25, item 9).

Run through bench/gpu_seeds.sh.  The architectures are defined here from
the projects' published configs, with random weights and synthetic data
(the device has no f5-tts or transformers package):

  f5      F5-TTS v1 Base DiT (dim 1024, depth 22, 16 heads, ff_mult 2,
          text_dim 512, 4 ConvNeXt text layers, 100 mel channels; 336M
          parameters), bf16 autocast, AdamW; the micro-batch is in mel frames
          (6.4 s clips of 600 frames, as batch_size_type: frame counts them)
  parler  a Parler-TTS Mini v1-sized decoder (24 layers, d 1024, 16 heads,
          ffn 4096, 9 codebooks of 1088, cross-attention to 64 frozen text
          encoder states, 50 prompt tokens + 10 s of 86 Hz audio), bf16
          autocast, AdamW; the frozen T5 encoder itself is not run
  orpheus Orpheus 3B: Llama 3.2 3B (d 3072, 28 layers, 24 heads, 8 KV heads,
          ffn 8192, vocabulary 156940, tied embeddings), bf16 frozen base,
          LoRA r 64 on the seven projections (the 24 GB recipe), gradient
          checkpointing, sequences of 1024 tokens

Subcommands as in bench/gpu_verify.py (train, bisect, hold, run).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_verify as gv  # noqa: E402

gv.MODELS.clear()
gv.RANGE.clear()
gv.RANGE_DRY.clear()
gv.MODELS.update({
    "f5": ("f5", False, dict(dim=1024, depth=22, heads=16, ff_mult=2, text_dim=512, conv_layers=4, mels=100,
                             vocab=2546, clip=600),
           dict(dim=64, depth=2, heads=4, ff_mult=2, text_dim=32, conv_layers=1, mels=20, vocab=64, clip=32)),
    "parler": ("parler", False, dict(d=1024, layers=24, heads=16, ffn=4096, books=9, vocab=1088, enc=64,
                                     prompt=50, frames=860),
               dict(d=64, layers=2, heads=4, ffn=128, books=3, vocab=64, enc=8, prompt=8, frames=40)),
    "orpheus": ("llama", True, dict(d=3072, layers=28, heads=24, kv=8, ffn=8192, vocab=156940, seq=1024, rank=64),
                dict(d=64, layers=2, heads=4, kv=2, ffn=128, vocab=1000, seq=64, rank=8)),
    # Orpheus's full fine-tune (issue 29): the same 3B Llama, every weight
    # training in fp32 with AdamW, its published 1024-token sequences.
    "orpheus-full": ("llama", False, dict(d=3072, layers=28, heads=24, kv=8, ffn=8192, vocab=156940, seq=1024,
                                          rank=0),
                     dict(d=64, layers=2, heads=4, kv=2, ffn=128, vocab=1000, seq=64, rank=0)),
})
gv.STEP.update({"f5": 600})
gv.STEP_DRY.update({"f5": 32})
gv.RANGE.update({"f5": (600, 60000, 6000), "parler": (1, 128, 8), "orpheus": (1, 64, 4),
                 "orpheus-full": (1, 8, 2)})
gv.RANGE_DRY.update({"f5": (32, 2048, 192), "parler": (1, 64, 6), "orpheus": (1, 64, 6),
                     "orpheus-full": (1, 8, 2)})


def _attention(torch, q, k, v, causal):
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    att = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        L, S = q.shape[-2], k.shape[-2]
        att = att.masked_fill(torch.ones(L, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return att.softmax(-1) @ v


def _autocast(torch, dev):
    if dev == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    import contextlib
    return contextlib.nullcontext()


def build_f5(torch, c, ckpt, dev):
    nn, F = torch.nn, torch.nn.functional
    D, H, M, clip = c["dim"], c["heads"], c["mels"], c["clip"]

    class ConvNeXt(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.dw = nn.Conv1d(d, d, 7, padding=3, groups=d, device=dev)
            self.norm = nn.LayerNorm(d, device=dev)
            self.pw1 = nn.Linear(d, 2 * d, device=dev)
            self.pw2 = nn.Linear(2 * d, d, device=dev)

        def forward(self, x):
            y = self.dw(x.transpose(1, 2)).transpose(1, 2)
            return x + self.pw2(F.gelu(self.pw1(self.norm(y))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.mod = nn.Linear(D, 6 * D, device=dev)
            self.n1 = nn.LayerNorm(D, elementwise_affine=False, device=dev)
            self.qkv = nn.Linear(D, 3 * D, device=dev)
            self.o = nn.Linear(D, D, device=dev)
            self.n2 = nn.LayerNorm(D, elementwise_affine=False, device=dev)
            self.ff1 = nn.Linear(D, c["ff_mult"] * D, device=dev)
            self.ff2 = nn.Linear(c["ff_mult"] * D, D, device=dev)

        def forward(self, x, t):
            s1, b1, g1, s2, b2, g2 = self.mod(F.silu(t)).unsqueeze(1).chunk(6, dim=-1)
            B, N, _ = x.shape
            h = self.n1(x) * (1 + s1) + b1
            q, k, v = self.qkv(h).view(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = _attention(torch, q, k, v, False).transpose(1, 2).reshape(B, N, D)
            x = x + g1 * self.o(a)
            h = self.n2(x) * (1 + s2) + b2
            return x + g2 * self.ff2(F.gelu(self.ff1(h), approximate="tanh"))

    class DiT(nn.Module):
        def __init__(self):
            super().__init__()
            self.text = nn.Embedding(c["vocab"] + 1, c["text_dim"], device=dev)
            self.text_blocks = nn.ModuleList([ConvNeXt(c["text_dim"]) for _ in range(c["conv_layers"])])
            self.inp = nn.Linear(2 * M + c["text_dim"], D, device=dev)
            self.pos1 = nn.Conv1d(D, D, 31, padding=15, groups=16, device=dev)
            self.pos2 = nn.Conv1d(D, D, 31, padding=15, groups=16, device=dev)
            self.t1 = nn.Linear(256, D, device=dev)
            self.t2 = nn.Linear(D, D, device=dev)
            self.blocks = nn.ModuleList([Block() for _ in range(c["depth"])])
            self.nout = nn.LayerNorm(D, elementwise_affine=False, device=dev)
            self.mod_out = nn.Linear(D, 2 * D, device=dev)
            self.out = nn.Linear(D, M, device=dev)

        def forward(self, inp):
            x, cond, text, time = inp
            with _autocast(torch, dev):
                tx = self.text(text)
                for blk in self.text_blocks:
                    tx = blk(tx)
                h = self.inp(torch.cat([x, cond, tx], dim=-1))
                p = F.mish(self.pos1(h.transpose(1, 2)))
                h = h + F.mish(self.pos2(p)).transpose(1, 2)
                half = torch.exp(-torch.arange(128, device=x.device) * (9.21 / 128))
                emb = torch.cat([(time[:, None] * 1000 * half).sin(), (time[:, None] * 1000 * half).cos()], -1)
                t = self.t2(F.silu(self.t1(emb)))
                for blk in self.blocks:
                    if ckpt:
                        h = torch.utils.checkpoint.checkpoint(blk, h, t, use_reentrant=False)
                    else:
                        h = blk(h, t)
                sc, sh = self.mod_out(F.silu(t)).unsqueeze(1).chunk(2, dim=-1)
                return self.out(self.nout(h) * (1 + sc) + sh).float()

    model = DiT()
    opt = torch.optim.AdamW(model.parameters(), lr=7.5e-5)

    def batch(frames):
        b = max(1, frames // clip)
        x1 = torch.randn(b, clip, M, device=dev)
        x0 = torch.randn(b, clip, M, device=dev)
        t = torch.rand(b, device=dev)
        xt = (1 - t[:, None, None]) * x0 + t[:, None, None] * x1
        cond = x1 * (torch.rand(b, clip, 1, device=dev) < 0.3)
        text = torch.randint(c["vocab"] + 1, (b, clip), device=dev)
        return (xt, cond, text, t), x1 - x0

    def loss_fn(out, flow):
        return F.mse_loss(out, flow)
    return model, opt, batch, loss_fn


def build_parler(torch, c, ckpt, dev):
    nn, F = torch.nn, torch.nn.functional
    D, H, K, V = c["d"], c["heads"], c["books"], c["vocab"]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2, self.n3 = (nn.LayerNorm(D, device=dev) for _ in range(3))
            self.qkv = nn.Linear(D, 3 * D, bias=False, device=dev)
            self.o = nn.Linear(D, D, bias=False, device=dev)
            self.cq = nn.Linear(D, D, bias=False, device=dev)
            self.ckv = nn.Linear(D, 2 * D, bias=False, device=dev)
            self.co = nn.Linear(D, D, bias=False, device=dev)
            self.f1 = nn.Linear(D, c["ffn"], bias=False, device=dev)
            self.f2 = nn.Linear(c["ffn"], D, bias=False, device=dev)

        def heads(self, t):
            B, L, _ = t.shape
            return t.view(B, L, H, D // H).transpose(1, 2)

        def forward(self, x, enc):
            B, L, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
            x = x + self.o(_attention(torch, self.heads(q), self.heads(k), self.heads(v), True)
                           .transpose(1, 2).reshape(B, L, D))
            k, v = self.ckv(enc).chunk(2, dim=-1)
            x = x + self.co(_attention(torch, self.heads(self.cq(self.n2(x))), self.heads(k), self.heads(v), False)
                            .transpose(1, 2).reshape(B, L, D))
            return x + self.f2(F.gelu(self.f1(self.n3(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.ModuleList([nn.Embedding(V + 1, D, device=dev) for _ in range(K)])
            self.prompt = nn.Embedding(32128, D, device=dev)
            self.pos = nn.Embedding(4096, D, device=dev)
            self.enc_proj = nn.Linear(1024 if D == 1024 else D, D, device=dev)
            self.layers = nn.ModuleList([Layer() for _ in range(c["layers"])])
            self.norm = nn.LayerNorm(D, device=dev)
            self.heads = nn.ModuleList([nn.Linear(D, V, bias=False, device=dev) for _ in range(K)])

        def forward(self, inp):
            codes, prompt, enc = inp
            with _autocast(torch, dev):
                x = sum(e(codes[:, k]) for k, e in enumerate(self.emb))
                x = torch.cat([self.prompt(prompt), x], dim=1)
                x = x + self.pos(torch.arange(x.shape[1], device=x.device))
                enc = self.enc_proj(enc)
                for layer in self.layers:
                    if ckpt:
                        x = torch.utils.checkpoint.checkpoint(layer, x, enc, use_reentrant=False)
                    else:
                        x = layer(x, enc)
                x = self.norm(x[:, prompt.shape[1]:])
                return torch.stack([h(x) for h in self.heads], dim=1).float()

    model = Decoder()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    L = c["frames"] + K   # the delay pattern adds a frame per codebook

    def batch(b):
        codes = torch.randint(V + 1, (b, K, L), device=dev)
        prompt = torch.randint(32128, (b, c["prompt"]), device=dev)
        enc = torch.randn(b, c["enc"], 1024 if D == 1024 else D, device=dev)
        return (codes, prompt, enc), torch.randint(V, (b, K, L), device=dev)

    def loss_fn(out, y):
        return F.cross_entropy(out.reshape(-1, V), y.reshape(-1))
    return model, opt, batch, loss_fn


def build_llama(torch, c, ckpt, dev):
    nn, F = torch.nn, torch.nn.functional
    D, H, KV, R = c["d"], c["heads"], c["kv"], c["rank"]
    hd = D // H
    full = R == 0   # rank 0: a full fine-tune, fp32 weights that all train (HF's default)
    wdt = torch.bfloat16 if dev == "cuda" and not full else torch.float32

    class LoRALinear(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.base = nn.Linear(i, o, bias=False, device=dev, dtype=wdt)
            self.base.weight.requires_grad_(full)
            if not full:
                self.a = nn.Linear(i, R, bias=False, device=dev)
                self.b = nn.Linear(R, o, bias=False, device=dev)
                nn.init.zeros_(self.b.weight)

        def forward(self, x):
            return self.base(x) if full else self.base(x) + self.b(self.a(x))

    class RMS(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(D, device=dev, dtype=wdt), requires_grad=full)

        def forward(self, x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * self.w

    def rope(t, cos, sin):
        t1, t2 = t[..., : hd // 2], t[..., hd // 2:]
        return t * cos + torch.cat([-t2, t1], dim=-1) * sin

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMS(), RMS()
            self.q = LoRALinear(D, D)
            self.k = LoRALinear(D, KV * hd)
            self.v = LoRALinear(D, KV * hd)
            self.o = LoRALinear(D, D)
            self.gate = LoRALinear(D, c["ffn"])
            self.up = LoRALinear(D, c["ffn"])
            self.down = LoRALinear(c["ffn"], D)

        def forward(self, x, cos, sin):
            B, L, _ = x.shape
            h = self.n1(x)
            q = self.q(h).view(B, L, H, hd).transpose(1, 2)
            k = self.k(h).view(B, L, KV, hd).transpose(1, 2)
            v = self.v(h).view(B, L, KV, hd).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            x = x + self.o(_attention(torch, q, k, v, True).transpose(1, 2).reshape(B, L, D))
            h = self.n2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(c["vocab"], D, device=dev, dtype=wdt)
            self.emb.weight.requires_grad_(full)
            self.layers = nn.ModuleList([Layer() for _ in range(c["layers"])])
            self.norm = RMS()

        def forward(self, idx):
            with _autocast(torch, dev):
                x = self.emb(idx)
                if ckpt and not full:   # as HF does with gradient checkpointing on a frozen embedding
                    x.requires_grad_(True)
                L = idx.shape[1]
                inv = 1.0 / (500000 ** (torch.arange(0, hd, 2, device=idx.device).float() / hd))
                ang = torch.arange(L, device=idx.device).float()[:, None] * inv[None]
                cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
                sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
                for layer in self.layers:
                    if ckpt:
                        x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
                    else:
                        x = layer(x, cos, sin)
                return F.linear(self.norm(x), self.emb.weight)   # tied head

    model = Llama()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5)
    T, V = c["seq"], c["vocab"]

    def batch(b):
        x = torch.randint(V, (b, T + 1), device=dev)
        return x[:, :-1], x[:, 1:]

    def loss_fn(out, y):
        return F.cross_entropy(out.float().reshape(-1, V), y.reshape(-1))
    return model, opt, batch, loss_fn


gv.EXTRA_BUILDERS.update({"f5": build_f5, "parler": build_parler, "llama": build_llama})


class SeedsRun(gv.Run):
    def plan(self):
        if self.dry:
            return [("f5", "default", ["fraction", "replay", "plain"]),
                    ("parler", "default", ["fraction", "replay"]),
                    ("orpheus", "default", ["fraction", "replay"]),
                    ("orpheus-full", "default", ["ladder"])]
        return [("orpheus-full", "default", ["ladder"]),
                ("f5", "default", ["replay", "plain"]),
                ("parler", "default", ["replay", "plain"]),
                ("orpheus", "default", ["replay", "plain"]),
                ("f5", "default", ["emulated"]),
                ("parler", "default", ["emulated"]),
                ("orpheus", "default", ["emulated"])]

    def group(self, model, alloc, parts):
        if parts != ["ladder"]:
            return super().group(model, alloc, parts)
        if not self.ab or self.left() < 30:
            self.line("%s %s ladder: skipped (%s)" % (model, alloc, "no autobatch binary" if not self.ab
                                                          else "%d s left" % self.left()))
            return None
        try:
            return self.ladder(model, alloc)
        except Exception as e:  # one part's failure must not stop the others
            self.line("%s %s ladder: failed: %s: %s" % (model, alloc, type(e).__name__, e))
            return None

    def ladder(self, model, alloc):
        """Beyond the batch (issue 29): autobatch on a model whose batch 1
        may fit nowhere on the emulated card, every knob allowed; what it
        says (the breakdown, the knobs it turned on or why none helps)."""
        lo, hi, g = (gv.RANGE_DRY if self.dry else gv.RANGE)[model]
        tag = "%s-%s-ladder" % (model, alloc)
        js = os.path.join(self.work, tag + ".json")
        argv = [self.ab, "--no-cache", "--no-confirm", "--preset", "env", "--batch", "%d:%d:%d" % (lo, hi, g),
                "--steps", "2", "--warmup", "1", "--kill-grace", "2s", "--hang-timeout", "90s",
                "--trial-timeout", "150s", "--budget", "%ds" % int(self.left() - 20),
                "--allow", "precision,optim8bit,sharding", "--knob", "precision=env:AB_BF16",
                "--knob", "optim8bit=env:AB_OPTIM8BIT", "--knob", "sharding=env:AB_SHARDING", "--json", js]
        argv += (["--trial-memory-limit", "%dK" % (self.cell(model, alloc).get("budget", 6 << 30) // 1024)]
                 if self.dry else ["--emulate-gpu-memory", "%dG" % self.a.budget_gib])
        argv += ["--", self.py, self.me, "train", "--model", model] + (["--dry"] if self.dry else [])
        rc, out, secs = self.call(argv, self.env(alloc), self.left() - 5, os.path.join(self.work, tag + ".out"))
        said = [ln for ln in out.splitlines()
                if ln.startswith("autobatch: ") and ("fits in no cell" in ln or "nothing fits" in ln
                                                     or "batch is not the problem" in ln or "--allow" in ln
                                                     or "best:" in ln or "ran out with" in ln)]
        try:
            doc = json.load(open(js))
        except (OSError, ValueError):
            doc = {}
        r = {"rc": rc, "wall": round(secs, 1), "said": said,
             "failure": (doc.get("memory_breakdown") or {}).get("failure"),
             "knobs": doc.get("knobs"), "best": doc.get("best")}
        self.cell(model, alloc)["ladder"] = r
        self.record({"part": "ladder", "model": model, "alloc": alloc, **r})
        self.line("%s %s ladder: exit %d, %.0f s; knobs %s; best %s" % (model, alloc, rc, secs,
                                                                       json.dumps(r["knobs"]), json.dumps(r["best"])))
        for ln in said:
            self.line("   " + ln)
        return r

    def hint_for_card(self, model, alloc):
        c = self.cell(model, alloc)
        for k in ("fraction", "replay", "plain"):
            r = c.get(k) or {}
            b = r.get("boundary") or r.get("max_fit")
            if b:
                return b
        return None


def main(argv):
    if argv and argv[0] == "run":
        sys.argv = [sys.argv[0]] + argv
        gv.Run = SeedsRun
        if "--script" not in argv:
            argv = argv + ["--script", os.path.abspath(__file__)]
    return gv.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
