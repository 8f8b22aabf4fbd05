"""measure.py: the best wall time of a command, and its peak memory.

usage: /usr/bin/python3 bench/measure.py REPS CMD [ARG...]

Runs CMD REPS times (output discarded) and prints "ms=T mb=M": T the
shortest wall time in milliseconds, M the peak resident memory (MiB) of
that run, from the kernel's accounting of the child (wait4).  Exits 1 when
a run fails."""
import os
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    reps, cmd = int(sys.argv[1]), sys.argv[2:]
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        dt = time.perf_counter() - t0
        if child.returncode != 0:
            sys.exit(f"measure.py: {' '.join(cmd)} exited with {child.returncode}")
        if best is None or dt < best[0]:
            best = (dt, usage.ru_maxrss / 1024)
    print(f"ms={best[0] * 1e3:.2f} mb={best[1]:.1f}")


if __name__ == "__main__":
    main()
