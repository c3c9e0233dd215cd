# shellcheck shell=bash
# Source on a GPU machine without network: install the carried wheels (pydantic and its
# needs) into /tmp/site. Usage: source benchmarks/device_env.sh
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
