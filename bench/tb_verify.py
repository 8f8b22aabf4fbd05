#!/usr/bin/env python3
"""bench/tb_verify.py: reads a graphrun TensorBoard run with TensorBoard's own
reader and checks it against the run's JSON log.

    bench/.venv/bin/pip install tensorboard      # once, in the git-ignored venv
    graphrun MODEL.graph --steps N --eval NAME --eval-every K \\
        --log run.jsonl --tensorboard tb --run-name r1
    bench/.venv/bin/python bench/tb_verify.py tb/r1 run.jsonl

Loads the folder with tensorboard.backend.event_processing.event_accumulator
(what `tensorboard --logdir` runs), prints each tag's count, steps and last
value, then checks that every value the log records (train/KEY for each key
of a record line, eval/NAME for its evaluations) is in TensorBoard at the
same step with the same value as a float32, and the reverse.  Exits 1 on any
difference.  Not part of the test suite: the suite checks the files with
graphrun's own reader (tests/test_tensorboard.c); this checks that real
TensorBoard agrees.
"""
import json
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def log_scalars(path):
    """{(tag, step): value} from a graphrun --log file."""
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("event") == "done":
                step = r["step"]
                out.update({("eval/" + k, step): v for k, v in r["eval"].items()})
            elif "eval" in r:
                out.update({("eval/" + k, r["step"]): v for k, v in r["eval"].items()})
            else:
                for k, v in r.items():
                    if k not in ("step", "elapsed_s"):
                        out[("train/" + k, r["step"])] = v
    return out


def tb_scalars(run_dir):
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        print(f"{tag}: {len(events)} values, steps {steps[0]}..{steps[-1]}, "
              f"last {events[-1].value:.6g}")
        if steps != sorted(set(steps)):
            print(f"  steps of {tag} do not increase")
            out[(tag, "not monotone")] = None
        out.update({(tag, e.step): e.value for e in events})
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    tb = tb_scalars(sys.argv[1])
    if len(sys.argv) == 2:
        return 0
    log = log_scalars(sys.argv[2])
    bad = [k for k in log if k not in tb or tb[k] != f32(log[k])]
    bad += [k for k in tb if k not in log]
    for k in bad[:20]:
        print(f"differs: {k}: log {log.get(k)}, tensorboard {tb.get(k)}")
    print(f"{len(log)} logged values, {len(tb)} in TensorBoard, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
