"""Import the repository's example code (``examples/harness``, ``docs/examples/*.py``) under names of
its own, without putting those folders on ``sys.path``: a pytester run that writes its own
``harness.py`` must not find the example package in ``sys.modules`` under the same name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load(relpath: str) -> ModuleType:
    """The module (``x.py``) or package (a folder) at ``relpath``, as ``mcpfaults_example_<stem>``."""
    path = ROOT / relpath
    name = f"mcpfaults_example_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    if path.is_dir():
        spec = importlib.util.spec_from_file_location(
            name, path / "__init__.py", submodule_search_locations=[str(path)]
        )
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, relpath
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
