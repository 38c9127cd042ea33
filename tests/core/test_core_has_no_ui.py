import subprocess
import sys

import pytest


@pytest.mark.slow  # tier 2: a whole process's imports; the import graph's folders are tier 1's
def test_importing_core_loads_no_ui_library():
    code = (
        "import sys, pkgutil, importlib, minitx.core, minitx.checkpoints\n"
        "for m in pkgutil.iter_modules(minitx.core.__path__):\n"
        "    importlib.import_module('minitx.core.' + m.name)\n"
        "print(sorted(n for n in ('textual', 'click', 'rich') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
