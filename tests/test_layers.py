"""The import graph: ``meta_rules`` and ``postprocs`` depend on the converter's vocabulary
alone (the package scan_tir/lower/vocabulary/), and every project import is at module level, where
it can be seen, except where LAZY_ALLOWED says why."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("scan_tir", "meta_rules", "postprocs")
VOCABULARY = "scan_tir.lower.vocabulary"
#: Function-local project imports allowed: the CLI's, so that ``--help`` imports no TVM;
#: the ONNX frontend's, whose converters subclass TVM's ONNX importer, which needs the
#: optional ``onnx`` package (``import scan_tir.relax`` works without it).
LAZY_ALLOWED = {ROOT / "scan_tir" / "cli.py", ROOT / "scan_tir" / "relax" / "onnx.py"}


def _sources(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The absolute module names ``node`` imports (for ``from m import a``: ``m``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.level:
        return [node.module or ""]
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return [".".join([*base, node.module] if node.module else base)]


def _imports(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, list[str], bool]]:
    """Each import statement of ``path``: (node, modules, inside a function)."""
    tree = ast.parse(path.read_text(), str(path))
    local: set[int] = set()
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            local |= {id(n) for n in ast.walk(func) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return [
        (node, _imported(node, path), id(node) in local)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PROJECT


def test_rules_and_postprocs_import_only_the_vocabulary_in_a_fresh_process():
    code = (
        "import sys, meta_rules, postprocs\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'scan_tir')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split()
    assert loaded[:3] == ["scan_tir", "scan_tir.lower", VOCABULARY]
    assert all(m.startswith(VOCABULARY + ".") for m in loaded[3:]), loaded


@pytest.mark.parametrize(
    "path", _sources("meta_rules", "postprocs"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_rules_and_postprocs_name_nothing_of_scan_tir_but_the_vocabulary(path):
    modules = [m for _, found, _ in _imports(path) for m in found]
    found = [m for m in modules if m.split(".")[0] == "scan_tir"]
    assert set(found) <= {VOCABULARY}, found


@pytest.mark.parametrize(
    "path", sorted((ROOT / "scan_tir" / "lower" / "vocabulary").glob("*.py")),
    ids=lambda p: p.name,
)
def test_the_vocabulary_imports_nothing_of_the_project_but_itself(path):
    modules = [m for _, found, _ in _imports(path) for m in found]
    assert not [m for m in modules if _is_project(m) and not m.startswith(VOCABULARY)]


@pytest.mark.parametrize(
    "path", _sources(*PROJECT), ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_function_local_import_of_the_project(path):
    """A lazy import hides a dependency from the module's header (and from this test's
    other checks); outside cli.py, project imports go at the top."""
    lazy = [
        f"line {node.lineno}: {', '.join(modules)}"
        for node, modules, inside in _imports(path)
        if inside and any(_is_project(m) for m in modules)
    ]
    assert path in LAZY_ALLOWED or not lazy, lazy


def test_the_cli_keeps_its_lazy_imports():
    """The exception above is still needed: ``scan_tir.cli`` imports no TVM by itself, so
    ``scan-tir --help`` answers at once."""
    code = "import sys, scan_tir.cli; print('tvm' in sys.modules)"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def _package(module: str) -> str | None:
    """The layer a module belongs to: a subpackage of scan_tir (or its top-level module),
    meta_rules, postprocs; None outside the project."""
    parts = module.split(".")
    if parts[0] in ("meta_rules", "postprocs"):
        return parts[0]
    if parts[0] != "scan_tir":
        return None
    return ".".join(parts[:2])


def test_the_layers_import_each_other_one_way():
    """Data flows one way (TE -> lower -> transform -> tune -> db, ...): the graph of which
    layer imports which has no cycle."""
    edges: dict[str, set[str]] = {}
    for path in _sources(*PROJECT):
        source = _package(_module_of(path))
        for _, modules, _ in _imports(path):
            for module in modules:
                target = _package(module)
                if target and target not in (source, "scan_tir"):
                    edges.setdefault(source, set()).add(target)
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import cycle: {' -> '.join([*path, node])}"
        if node not in done:
            for target in sorted(edges.get(node, ())):
                visit(target, (*path, node))
            done.add(node)

    for node in sorted(edges):
        visit(node, ())
