#!/usr/bin/env bash
# Creates .venv/ and installs minitx into it (editable, with the test extras).
#
# torch: pyproject asks for a normal `torch>=2.2`. On a machine that keeps a CPU build of
# torch 2.13.0 in pip's local wheel folder (find-links), we install that one first so pip
# does not pull a multi-GB CUDA build; everywhere else pip resolves torch as usual.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
pip=".venv/bin/pip"
if "$pip" install --quiet --no-index --no-deps "torch==2.13.0" 2>/dev/null; then
    echo "setup: using the CPU build of torch 2.13.0 found on this machine"
fi
"$pip" install --quiet -e ".[dev]"
# The editable install finds minitx through a finder that Python asks after its path search, so
# from the folder that holds the clone (itself called minitx/) the clone folder would pass for
# the package, without its __version__. This .pth (run at every start, after the install's own)
# puts that finder first: the installed package wins wherever one stands.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cat > "$site/zz_minitx_first.pth" <<'PTH'
import sys; found = [f for f in sys.meta_path if getattr(f, "__name__", "") == "_EditableFinder" and "minitx" in getattr(sys.modules.get(f.__module__), "MAPPING", {})]; [sys.meta_path.remove(f) for f in found]; sys.meta_path[0:0] = found
PTH
# An editable install leaves minitx's own modules uncompiled; where the environment says
# PYTHONDONTWRITEBYTECODE (many container images do), every command would compile them again
# at start-up (~0.25 s of each `minitx train`). pip compiles everything else it installs.
.venv/bin/python -m compileall -q core checkpoints tui minitx >/dev/null
echo "setup: done (.venv/bin/minitx, .venv/bin/minitx-tui)"
