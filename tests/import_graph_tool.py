"""tools/import_graph.py loaded as a module (it is a script, not a package), for the tests that read its scan."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def import_graph() -> ModuleType:
    """The tools/import_graph.py module, registered as `import_graph`."""
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "tools" / "import_graph.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module
