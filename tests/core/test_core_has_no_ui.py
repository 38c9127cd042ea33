import subprocess
import sys


def test_importing_core_loads_no_ui_library():
    code = (
        "import sys, core.config, core.tasks, core.model, core.decode, core.train, "
        "core.checkpoint, core.alignment, core.bugs, checkpoints\n"
        "import pkgutil, importlib, core\n"
        "for m in pkgutil.iter_modules(core.__path__): importlib.import_module('core.' + m.name)\n"
        "print(sorted(n for n in ('textual', 'click', 'rich') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
