#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run a command and keep its output with the time each line arrived.

    python3 tsrun.py LOG -- COMMAND [ARG...]

stdout and stderr go together into one pipe; every line (split at "\\n"
and at "\\r", so each redraw of a progress bar is a line) is written to
LOG as "SECONDS<TAB>TEXT", SECONDS counted from just before the command
was started.  The last line of LOG is "#exit<TAB>STATUS<TAB>SECONDS"
(STATUS as the shell gives it: 128+N for a signal).  Nothing is printed;
the exit status is the command's.  Standard library only.

The command is started as it is: a memory cap (prlimit --as=...) belongs
on its command line, so that this process stays outside the cap.
"""
import os
import re
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: tsrun.py LOG -- COMMAND [ARG...]")
    log, cmd = argv[0], argv[2:]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    pending = b""
    with open(log, "w", encoding="utf-8") as out:
        def emit(raw):
            text = raw.decode("utf-8", "replace").rstrip()
            if text:
                out.write("%.3f\t%s\n" % (time.monotonic() - t0, text))
        while True:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            pending += chunk
            parts = re.split(rb"[\r\n]", pending)
            pending = parts.pop()
            for part in parts:
                emit(part)
            out.flush()
        emit(pending)
        rc = p.wait()
        status = 128 - rc if rc < 0 else rc
        out.write("#exit\t%d\t%.3f\n" % (status, time.monotonic() - t0))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
