#!/usr/bin/env bash
# Set everything up, then run the demo on the bundled robots.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m gear.demo "$@"
