#!/usr/bin/env bash
# Re-derives the prediction-band residuals in models/src/band.cc from the current model:
# runs ValidateShipped.BandResidualsAreTheCurrentValidationResiduals (it prints the values
# `stepcast validate docs/data/validation-runs.json` gives) and writes them into band.cc.
#   scripts/update-band-residuals.sh [BUILD_DIR]   (default build/; rebuild afterwards)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out=$(cd "$build" && ctest -R 'ValidateShipped.BandResidualsAreTheCurrentValidationResiduals' --output-on-failure || true)
python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
vals = dict(re.findall(r'^(pooled|megatron-core|fsdp2-eager|fsdp2-compile-loss|fsdp2-compile|deepspeed-zero-2021|deepspeed-zero|megatron-deepspeed|llm-foundry): \{([^}]*)\}', out, re.M))
if not vals:
    print("band residuals already current"); sys.exit(0)
path = 'models/src/band.cc'
src = open(path).read()
def fmt(v):
    n, mean, sd = [x.strip() for x in v.split(',')]
    return n, mean, sd
if 'pooled' in vals:
    n, mean, sd = fmt(vals['pooled'])
    src = re.sub(r'static const ValidationResiduals r\{[^}]*\}', f'static const ValidationResiduals r{{{n}, {mean}, {sd}}}', src)
for name, v in vals.items():
    if name == 'pooled': continue
    n, mean, sd = fmt(v)
    src, k = re.subn(r'\{[^{}]*\}(,\s*// ' + re.escape(name) + r'(?![-\w]))', f'{{{n}, {mean}, {sd}}}' + r'\1', src)
    if k != 1: sys.exit(f"band.cc: no line for {name}")
open(path, 'w').write(src)
print("updated:", ", ".join(sorted(vals)))
PY
