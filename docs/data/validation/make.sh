#!/usr/bin/env bash
# Regenerates docs/validation.md's outputs: the validate tables (validate.txt, and
# validate-torchtitan.txt, validate-megatron-bridge.txt, validate-megatron-bridge-moe.txt and
# validate-megatron-moe-recipes.txt, validate-megascale.txt for the held-out files docs/data/validation-torchtitan.json,
# validation-megatron-bridge.json, validation-megatron-bridge-moe.json and
# validation-megatron-moe-recipes.json, validation-megascale.json; validate-llm-foundry.txt for
# validation-llm-foundry.json) and the what-if
# table (whatif.md): each Narayanan Table 1 / BLOOM record's scenario, as validate writes it
# (--scenarios), with one input changed, priced by `stepcast estimate --json`. TFLOP/s under
# the record's own FLOP accounting scales as 1 / step time, so a variant's TFLOP/s is the
# validated TFLOP/s x validated step / variant step.
#   docs/data/validation/make.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/../../.."
build="${1:-build}"
out=docs/data/validation
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/cli/stepcast" validate docs/data/validation-runs.json --scenarios "$tmp/scenarios" > "$out/validate.txt"
"$build/cli/stepcast" validate docs/data/validation-runs.json --json > "$tmp/validate.json"
"$build/cli/stepcast" validate docs/data/validation-torchtitan.json > "$out/validate-torchtitan.txt"
"$build/cli/stepcast" validate docs/data/validation-megatron-bridge.json > "$out/validate-megatron-bridge.txt"
"$build/cli/stepcast" validate docs/data/validation-megatron-bridge-moe.json > "$out/validate-megatron-bridge-moe.txt"
"$build/cli/stepcast" validate docs/data/validation-megatron-moe-recipes.json > "$out/validate-megatron-moe-recipes.txt"
"$build/cli/stepcast" validate docs/data/validation-megascale.json > "$out/validate-megascale.txt"
"$build/cli/stepcast" validate docs/data/validation-llm-foundry.json > "$out/validate-llm-foundry.txt"
python3 - "$build/cli/stepcast" "$tmp" "$out/whatif.md" <<'PY'
import json, re, subprocess, sys
stepcast, tmp, dest = sys.argv[1:]
report = json.load(open(f"{tmp}/validate.json"))
rows = [r for r in report["records"]
        if r["id"].startswith("narayanan2021_t1_") or r["id"].startswith("bloom")]

def load(path):  # the generated scenarios carry // comment lines before the JSON
    return json.loads("".join(l for l in open(path) if not l.lstrip().startswith("//")))

def step(scenario):
    path = f"{tmp}/variant.json"
    json.dump(scenario, open(path, "w"))
    r = subprocess.run([stepcast, "estimate", "--json", path], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["step_time_s"]

def gpu(s, **kv):
    g = s["cluster"].get("gpu", {})
    if isinstance(g, str): g = {"preset": g}
    g.setdefault("preset", "a100-sxm-80gb")
    g.update(kv)
    s["cluster"]["gpu"] = g

variants = [
    ("no grad overlap", lambda s: s["plan"].__setitem__("overlap_grad_reduce", False)),
    ("bf16 grads", lambda s: s["plan"].__setitem__("grad_dtype", "bf16")),
    ("mb x2 (1 for BLOOM)", lambda s: s["plan"].__setitem__("microbatch", 1 if s["plan"]["microbatch"] == 2 else 2 * s["plan"]["microbatch"])),
    ("attn eff 0.3", lambda s: gpu(s, attention_efficiency=0.3)),
    ("4x100Gb/s NICs", lambda s: s["cluster"].__setitem__("inter_node", {"nic_Gbps": 100.0, "nics_per_node": 4})),
    ("GEMM ceiling 0.75", lambda s: gpu(s, gemm_efficiency=0.75)),
]
lines = ["| record | as validated | " + " | ".join(n for n, _ in variants) + " |",
         "|---|" + "---:|" * (1 + len(variants))]
for r in rows:
    base = load(f"{tmp}/scenarios/{r['id']}.json")
    measured, predicted = r["measured"]["value"], r["prediction"]["value"]
    t0 = step(base)
    cells = []
    for _, change in [("as validated", lambda s: None)] + variants:
        s = json.loads(json.dumps(base))
        change(s)
        v = predicted * t0 / step(s)
        cells.append(f"{v:.1f} ({(v - measured) / measured * 100:+.1f}%)")
    lines.append(f"| {r['id']} | " + " | ".join(cells) + " |")
open(dest, "w").write("\n".join(lines) + "\n")
PY
echo "wrote $out"
