#!/usr/bin/env bash
# Source it where the workbench is not installed (the GPU machine runs a checkout with its
# dependencies on PYTHONPATH): the package folders import as `foxwb.<folder>`, so this makes a
# folder foxwb/ of links to them in a temp dir and puts it first on PYTHONPATH. Where `foxwb`
# already imports (an installed checkout: scripts/setup.sh), it changes nothing.
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! (cd / && python3 -c "import foxwb.workbench") 2>/dev/null; then
  _link="$(mktemp -d)"
  mkdir "$_link/foxwb"
  for _d in components kernels workbench dashboards; do ln -s "$_root/$_d" "$_link/foxwb/$_d"; done
  export PYTHONPATH="$_link${PYTHONPATH:+:$PYTHONPATH}"
fi
unset _root _link _d
