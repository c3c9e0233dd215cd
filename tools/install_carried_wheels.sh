# shellcheck shell=bash
# On a GPU machine with no network: install the wheels carried in .whl/ (pydantic and its
# needs, fetched beforehand with `pip download`) into /tmp/site and put it on PYTHONPATH.
# Sourced, not run, because it exports into the calling shell:
#
#   source tools/install_carried_wheels.sh && python -m native ...
#
# Without a .whl/ folder it installs nothing. It also exports PYTHONUNBUFFERED=1, so that a
# run's output reaches the log in the order it was printed.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  echo "$0: source it (source $0), so that PYTHONPATH reaches your shell" >&2
  exit 2
fi
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
