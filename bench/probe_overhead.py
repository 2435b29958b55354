# SPDX-License-Identifier: MIT
"""The in-process probe's cost per optimizer step, measured side by side.

Runs the same tiny training loop (a 2-layer MLP, AdamW, a DataLoader) in
child interpreters with and without the probe, alternating, and prints
the median time per step of each and the difference.  The loop is made
small on purpose (a step of a few hundred microseconds), so the probe's
fixed cost per step is not hidden by the model's work.

  python3 bench/probe_overhead.py [--steps 2000] [--rounds 5]

Uses whatever torch the interpreter has (Debian's 1.13: the wrapped
Optimizer.step; 2.x: the global step hooks).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

LOOP = r'''
import sys, time, torch
torch.manual_seed(0)
torch.set_num_threads(1)
steps = int(sys.argv[1])
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1))
loader = torch.utils.data.DataLoader(data, batch_size=8)
times = []
done = 0
while done < steps:
    it = iter(loader)
    while done < steps:
        t0 = time.perf_counter()  # the batch fetch is timed too: the probe hooks it
        try:
            x, y = next(it)
        except StopIteration:
            break
        loss = torch.nn.functional.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        done += 1
times.sort()
print(times[len(times) // 2])
'''


def run(py, steps, probe_dir, channel):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if probe_dir:
        env["PYTHONPATH"] = probe_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["AUTOBATCH_PROBE"] = channel
    out = subprocess.run([py, "-c", LOOP, str(steps)], env=env, check=True,
                         stdout=subprocess.PIPE).stdout
    return float(out.decode().strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    probe_dir = os.path.join(here, "..", "probes", "python")
    with tempfile.TemporaryDirectory() as tmp:
        channel = os.path.join(tmp, "probe.jsonl")
        base, probed = [], []
        for _ in range(a.rounds):
            open(channel, "w").close()
            base.append(run(a.python, a.steps, None, None))
            probed.append(run(a.python, a.steps, probe_dir, channel))
            with open(channel) as f:
                lines = sum(1 for line in f if '"ab":"step"' in line)
            if lines != a.steps:
                sys.exit("probe reported %d steps, expected %d" % (lines, a.steps))
    import torch  # noqa: only for the version in the report
    b, p = statistics.median(base), statistics.median(probed)
    print("torch %s, %d steps x %d rounds" % (torch.__version__, a.steps, a.rounds))
    print("median step without probe: %.1f us" % (b * 1e6))
    print("median step with probe:    %.1f us" % (p * 1e6))
    print("probe cost per step:       %.1f us (%.2f%% of this tiny step)" % ((p - b) * 1e6,
                                                                          100 * (p - b) / b))


if __name__ == "__main__":
    main()
