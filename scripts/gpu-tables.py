#!/usr/bin/env python3
"""Distils a gpu-microbench.py result into the measured kernel table that sits next to the
published ones in models/data/measured/ (labelled as measured, with the command):

    python3 scripts/gpu-tables.py docs/data/executor-gpu/microbench.json > models/data/measured/h200-sxm.json

Keeps every GEMM row with its shape, precision and median time, the attention rows (SDPA
backends, head dim 128 and 64, causal and not) and the memory-bound rows; drops the
training steps (they are validation records: docs/data/executor-gpu/validation-h200.json).
"""
import json
import sys


def main():
    src = json.load(open(sys.argv[1]))
    out = {
        "format": 1,
        "kind": "stepcast-measured-kernels",
        "description": "Kernel timings MEASURED by this project (not published figures) on one GPU, "
                       "distilled from docs/data/executor-gpu/ by scripts/gpu-tables.py. The GPU preset's GEMM ceilings "
                       "and short-K factors, the sdpa-* attention families of attention.json and the PyTorch stacks' loss "
                       "traffic come from these rows; tests/models/measured_test.cc holds the model against all of them.",
        "gpu": src["gpu"], "gpu_preset": "h200-sxm",
        "software": f"PyTorch {src['torch']}, CUDA {src['cuda']}, cuDNN {src['cudnn']}",
        "date_utc": src["date_utc"],
        "command": src["command"],
        "timing": f"CUDA events around back-to-back launches after warm-up, each repetition >= {src['min_ms']} ms, "
                  f"median of {src['reps']}; random inputs",
        "clocks": src["clocks"],
        "gemm": [{k: r[k] for k in ("label", "m", "n", "k", "dtype", "time_s")} for r in src["gemm"] if "time_s" in r],
        "attention": [{k: r[k] for k in ("kernel", "seq", "batch", "heads", "head_dim", "causal", "fwd_s", "bwd_s")}
                      for r in src["attention"] if "fwd_s" in r],
        "memory_bound": [{k: r[k] for k in ("op", "bytes", "time_s") if k in r} for r in src["memory_bound"] if "time_s" in r],
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
