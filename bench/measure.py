"""measure.py: the best wall time of a command, and its peak memory.

usage: /usr/bin/python3 bench/measure.py REPS CMD [ARG...]

Runs CMD REPS times (output discarded) and prints "ms=T mb=M": T the
shortest wall time in milliseconds, M the peak resident memory (MiB) of
that run.  The peak comes from GNU time (/usr/bin/time, Debian's `time`),
which forks the command from its own small process: a child started from
Python would count Python's pages in its peak, since the kernel carries
the peak of the memory a process had before exec over to the program it
execs.  Exits 1 when a run fails."""
import os
import subprocess
import sys
import tempfile
import time

GNU_TIME = "/usr/bin/time"


def run_once(cmd, report):
    t0 = time.perf_counter()
    rc = subprocess.call([GNU_TIME, "-f", "%M", "-o", report] + cmd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"measure.py: {' '.join(cmd)} exited with {rc}")
    with open(report) as f:
        return dt, int(f.read().split()[-1]) / 1024


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"measure.py: {GNU_TIME} not found (apt-get install time)")
    reps, cmd = int(sys.argv[1]), sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        best = min(run_once(cmd, os.path.join(tmp, "rss")) for _ in range(reps))
    print(f"ms={best[0] * 1e3:.2f} mb={best[1]:.1f}")


if __name__ == "__main__":
    main()
