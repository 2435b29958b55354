# SPDX-License-Identifier: MIT
"""The ```console blocks of README.md and docs/*.md, run as a user would.

A block is a shell session: a line "$ CMD" (continued by a trailing
backslash) is a command, the lines after it up to the next "$ " are what
it printed.  Each command runs in one scratch directory per file, on a
terminal 80 columns wide (script(1)), so the output is what a user sees;
the terminal's redraws are resolved as a terminal would (clean()).

check: the command must exit 0, and every printed line of the block
(wrapped lines joined) must appear in its output, in order, with each
number compared as "a number" (timings and speeds differ from run to
run) except in lines that state a figure the README promises (the
largest fit, the first failure), which must match exactly; the trial
lines are compared as a set of shapes and the margin over the runner-up
not at all (both depend on timing noise).

update FILE...: rewrite the printed lines of every block from a run.

    python3 readme_blocks.py check|update WORKDIR FILE...
"""
import os
import re
import subprocess
import sys

NUM = re.compile(r"\d+(?:\.\d+)?")
EXACT = re.compile(r"largest fit|fails")
# A finished trial's line: how many there are and in what order depends on
# timing noise (a finalist re-measured), so they are compared as a set of
# shapes; the margin over the runner-up is noise's too.
TRIAL = re.compile(r"^#\d+ ")
VOLATILE = re.compile(r"runner-up")


def blocks(path):
    """[(start, end, [(cmd, first_line, [printed])])] of each console block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        start, i, cmds = i, i + 1, []
        while i < len(lines) and lines[i].strip() != "```":
            if lines[i].startswith("$ "):
                cmd, first = lines[i][2:], i
                while cmd.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd + "\n" + lines[i]
                cmds.append([cmd, first, []])
            elif cmds:
                cmds[-1][2].append(lines[i])
            i += 1
        out.append((start, i, cmds))
        i += 1
    return out, lines


def clean(raw):
    """What the terminal shows at the end: a small emulator of the
    sequences autobatch's live status uses (\r, \n, cursor up, erase to
    the end of the line or screen; colours are dropped)."""
    screen, row, col, i = [[]], 0, 0, 0
    seq = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
    while i < len(raw):
        ch = raw[i]
        if ch == "\x1b":
            m = seq.match(raw, i)
            if m:
                arg, op = m.group(1), m.group(2)
                n = int(arg) if arg.isdigit() else 1
                if op == "A":
                    row = max(0, row - n)
                elif op == "B":
                    row += n
                elif op == "K":
                    del screen[row][col:]
                elif op == "J":
                    del screen[row][col:]
                    del screen[row + 1:]
                elif op == "G":
                    col = max(0, n - 1)
                i = m.end()
            else:
                i += 2
            while len(screen) <= row:
                screen.append([])
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            while len(screen) <= row:
                screen.append([])
        elif ch >= " " or ch == "\t":
            line = screen[row]
            while len(line) < col:
                line.append(" ")
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        i += 1
    res = ["".join(l).rstrip() for l in screen]
    while res and not res[-1]:
        res.pop()
    return res


def run(cmd, cwd):
    env = dict(os.environ, COLUMNS="80", LINES="40", TERM="xterm")
    shell = "stty cols 80 rows 40 2>/dev/null; " + cmd
    p = subprocess.run(["script", "-qec", shell, "/dev/null"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    return p.returncode, clean(p.stdout.decode("utf-8", "replace"))


def logical(lines):
    """Lines with their wrapped continuations (two spaces after an
    autobatch: line) joined back, blank lines dropped."""
    out = []
    for x in lines:
        if x.startswith("  ") and out and out[-1].startswith("autobatch: "):
            out[-1] += " " + x.strip()
        elif x.strip():
            out.append(x)
    return out


def shape(line):
    line = " ".join(line.split())
    return line if EXACT.search(line) else NUM.sub("#", line)


def main():
    mode, work, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    bad = 0
    for path in files:
        found, lines = blocks(path)
        if not found:
            continue
        cwd = os.path.join(work, os.path.basename(path) + ".d")
        os.makedirs(cwd, exist_ok=True)
        for target in ("build", "examples", "configs"):
            src = os.path.join(work, target)
            if os.path.exists(src) and not os.path.exists(os.path.join(cwd, target)):
                os.symlink(src, os.path.join(cwd, target))
        edits = []
        for _, _, cmds in found:
            for cmd, first, printed in cmds:
                rc, got = run(cmd, cwd)
                name = "%s:%d" % (path, first + 1)
                if rc != 0:
                    print("FAIL %s: '%s' exited %d:\n  %s" % (name, cmd, rc, "\n  ".join(got[-15:])))
                    bad += 1
                    continue
                if mode == "update":
                    edits.append((first, len(printed), got))
                    continue
                want, have = logical(printed), logical(got)
                trials_w = {shape(x) for x in want if TRIAL.match(x)}
                trials_h = {shape(x) for x in have if TRIAL.match(x)}
                if trials_w - trials_h:
                    print("FAIL %s: no trial line like:\n  %s\nits output was:\n  %s"
                          % (name, "\n  ".join(sorted(trials_w - trials_h)), "\n  ".join(got)))
                    bad += 1
                    continue
                want = [shape(x) for x in want if not TRIAL.match(x) and not VOLATILE.search(x)]
                have = [shape(x) for x in have]
                k = 0
                for w in want:
                    while k < len(have) and have[k] != w:
                        k += 1
                    if k == len(have):
                        print("FAIL %s: '%s' no longer prints (in this order):\n  %s\n"
                              "its output was:\n  %s" % (name, cmd.split("\n")[0], w, "\n  ".join(got)))
                        bad += 1
                        break
                    k += 1
                else:
                    print("ok %s: '%s' (%d lines)" % (name, cmd.split("\n")[0][:60], len(want)))
        if mode == "update" and edits:
            for first, n, got in sorted(edits, reverse=True):
                nc = first
                while lines[nc].endswith("\\"):
                    nc += 1
                lines[nc + 1:nc + 1 + n] = got
            open(path, "w", encoding="utf-8").write("\n".join(lines))
            print("updated %s" % path)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
