"""The API reference (issue 17): every public class, function, method and property of the
public modules has a docstring, and the README's command builds the reference from them."""

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The public modules: what the README's reference command documents.
MODULES = ("sbdelta", "sbdelta.management", "sbdelta.maintenance", "sbdelta.paired",
           "sbdelta.exceptions", "sbdelta.amqp")


def _undocumented():
    missing, seen = [], set()
    for name in MODULES:
        module = importlib.import_module(name)
        for public in module.__all__:
            obj = getattr(module, public)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if not inspect.getdoc(obj):
                missing.append(f"{name}.{public}")
            if not inspect.isclass(obj):
                continue
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(value, property):
                    doc = value.__doc__
                elif inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)):
                    doc = inspect.getdoc(getattr(value, "__func__", value))
                else:
                    continue
                if not doc:
                    missing.append(f"{name}.{public}.{attr}")
    return missing


def test_every_public_name_method_and_property_has_a_docstring():
    assert _undocumented() == []


def test_the_readme_command_builds_the_reference(tmp_path):
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "pdoc" in line and "-o" in line)
    assert all(m in command for m in MODULES), command
    out = tmp_path / "api"
    done = subprocess.run([str(Path(sys.executable).parent / "pdoc"), "-d", "google", "-o",
                           str(out), *MODULES], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    assert {"sbdelta.html", "sbdelta/management.html", "sbdelta/exceptions.html"} <= pages, pages
    assert "receive_dataframe" in (out / "sbdelta.html").read_text()
