# SPDX-License-Identifier: MIT
"""The ```console blocks of README.md and docs/*.md, run as a user would.

A block is a shell session: a line "$ CMD" (continued by a trailing
backslash) is a command, the lines after it up to the next "$ " are what
it printed.  Each command runs in one scratch directory per file, with a
warm-start cache and a TMPDIR of its own (the blocks of one page share
them, as they would for a user who copies them in order), on a terminal
80 columns wide (script(1)), so the output is what a user sees; the
terminal's redraws are resolved as a terminal would (clean()).

Every other code block that is not marked as data (a fence whose info
string is yaml, json, text, ...) is a command block a user might copy:
an indented block, a bare fence, ```sh.  Each must be either a console
block, which is run, or follow a line

    <!-- not run: WHY -->

saying why it is deliberately not run (it needs a GPU, Slurm, the user's
own train.py); one that is neither fails, so that every example either
runs in CI or says why not.  A console block after such a line is not run
either (a session shown from a GPU).

check: the command must exit 0, and every printed line of the block
(wrapped lines joined) must appear in its output, in order, with each
number compared as "a number" (timings and speeds differ from run to
run) except in lines that state a figure the README promises (the
largest fit, the first failure, a predicted largest micro-batch), which
must match exactly; the trial lines are compared as a set of shapes and
the margin over the runner-up not at all (both depend on timing noise).
A console block after a line

    <!-- run: sizes within N (WHY) -->

runs where a size may fit or not by luck (a trial memory limit that the
largest fit's peak nears in a longer run, where glibc's heap and the
probe's own few hundred kB decide: docs/pytorch.md): its promised
figures may differ by up to N.

update: rewrite the printed lines of every block from a run.
lint: only check that every command block is run or marked.

    python3 readme_blocks.py check|update|lint WORKDIR FILE...
"""
import os
import re
import subprocess
import sys

NUM = re.compile(r"\d+(?:\.\d+)?")
EXACT = re.compile(r"largest fit|fails|largest micro-batch")
# A finished trial's line: how many there are and in what order depends on
# timing noise (a finalist re-measured), so they are compared as a set of
# shapes, and a fit that ended once its memory stopped growing ("memory
# only") is the same shape as one whose speed was measured (whether a trial
# could end early depends on when its memory readings came).  The margin
# over the runner-up is noise's too, and so are the notes that a near tie
# is measured again and that a choice at a memory edge failed its
# confirmation (the search then goes on to the next).
TRIAL = re.compile(r"^#\d+ ")
FIT_DETAIL = re.compile(r" (memory only|# \S+/s)$")
VOLATILE = re.compile(r"runner-up|measuring both again|failed its confirmation run")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
WITHIN = re.compile(r"^<!--\s*run:\s*sizes within (\d+)\b.*-->$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)")
LIST = re.compile(r"^(?: {1,3}\S|[-*+] |\d+[.)] )")
# Fences whose info string says they hold data or a program, not commands.
DATA = {"yaml", "yml", "json", "text", "diff", "c", "python", "toml", "ini", "xml", "html", "markdown", "md",
        "roff"}


def code_blocks(lines):
    """[(first line, kind, the marker line before it or "")] of every
    code block: kind is the fence's info string ("" for a bare fence) or
    "indented".  An indented block starts after a blank line (or a marker
    comment) that does not continue a list item."""
    out, i, last = [], 0, ""
    while i < len(lines):
        line = lines[i]
        prev = lines[i - 1].strip() if i else ""
        m = FENCE.match(line)
        if m:
            out.append((i, m.group(2), last if last.startswith("<!--") else ""))
            close = m.group(1)[0] * len(m.group(1))
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(close):
                i += 1
            last, i = "```", i + 1
            continue
        if line.startswith("    ") and line.strip() and (not prev or prev.startswith("<!--")) \
                and not LIST.match(last):
            out.append((i, "indented", last if last.startswith("<!--") else ""))
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                i += 1
            last = "    "
            continue
        if line.strip():
            last = line.strip() if line.strip().startswith("<!--") else line
        i += 1
    return out


def unmarked(path, lines):
    """Complaints about the command blocks that are neither run nor marked."""
    bad = []
    for first, kind, mark in code_blocks(lines):
        if kind == "console" or kind.lower() in DATA or NOT_RUN.match(mark):
            continue
        bad.append("%s:%d: a command block (%s) that is neither a ```console block the test runs "
                   "nor marked '<!-- not run: WHY -->' on the line before it"
                   % (path, first + 1, kind or "a bare fence"))
    return bad


def blocks(path):
    """[(start, end, tolerance, [(cmd, first_line, [printed])])] of each
    console block that is run, and the file's lines."""
    lines = open(path, encoding="utf-8").read().split("\n")
    marks = {first: mark for first, kind, mark in code_blocks(lines) if kind == "console"}
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```console" or NOT_RUN.match(marks.get(i, "")):
            i += 1
            continue
        within = WITHIN.match(marks.get(i, ""))
        tol = int(within.group(1)) if within else 0
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
        out.append((start, i, tol, cmds))
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
    # A TMPDIR of the page's own: autobatch reports (and clears) what a
    # killed run left in $TMPDIR, and another test's must not show here.
    tmp = os.path.join(cwd, ".tmp")
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, COLUMNS="80", LINES="40", TERM="xterm", XDG_CACHE_HOME=os.path.join(cwd, ".cache"),
               TMPDIR=tmp)
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


def trial_shape(line):
    return FIT_DETAIL.sub(" (a fit's speed or memory only)", NUM.sub("#", " ".join(line.split())))


def same(want, have, tol):
    """want (a shape) matches the output line have: the same shape, and in
    a line of promised figures each number within tol."""
    have = " ".join(have.split())
    if not EXACT.search(want):
        return want == NUM.sub("#", have)
    if tol == 0 or NUM.sub("#", want) != NUM.sub("#", have):
        return want == have
    return all(abs(float(a) - float(b)) <= tol for a, b in zip(NUM.findall(want), NUM.findall(have)))


def main():
    mode, work, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    bad = 0
    for path in files:
        found, lines = blocks(path)
        for complaint in unmarked(path, lines):
            print("FAIL " + complaint)
            bad += 1
        if not found or mode == "lint":
            continue
        cwd = os.path.join(work, os.path.basename(path) + ".d")
        os.makedirs(cwd, exist_ok=True)
        for target in ("build", "examples", "configs"):
            src = os.path.join(work, target)
            if os.path.exists(src) and not os.path.exists(os.path.join(cwd, target)):
                os.symlink(src, os.path.join(cwd, target))
        edits = []
        for _, _, tol, cmds in found:
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
                trials_w = {trial_shape(x) for x in want if TRIAL.match(x)}
                trials_h = {trial_shape(x) for x in have if TRIAL.match(x)}
                if trials_w - trials_h:
                    print("FAIL %s: no trial line like:\n  %s\nits output was:\n  %s"
                          % (name, "\n  ".join(sorted(trials_w - trials_h)), "\n  ".join(got)))
                    bad += 1
                    continue
                want = [shape(x) for x in want if not TRIAL.match(x) and not VOLATILE.search(x)]
                k = 0
                for w in want:
                    while k < len(have) and not same(w, have[k], tol):
                        k += 1
                    if k == len(have):
                        within = ", sizes within %d" % tol if tol else ""
                        print("FAIL %s: '%s' no longer prints (in this order%s):\n  %s\n"
                              "its output was:\n  %s" % (name, cmd.split("\n")[0], within, w, "\n  ".join(got)))
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
