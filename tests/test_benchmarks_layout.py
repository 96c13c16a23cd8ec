"""The benchmarks package: imported as a package (no script paths), without cycles, and never by the library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# results/ keeps scripts exactly as they produced a recorded result; they are not part of the package
SOURCES = sorted(p for p in (ROOT / "benchmarks").rglob("*.py") if "results" not in p.relative_to(ROOT).parts)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SOURCES}
BASENAMES = {name.rsplit(".", 1)[-1] for name in MODULES} - {"benchmarks"}


def imported(tree: ast.AST) -> set[str]:
    """The benchmarks modules a module imports, anywhere in it (lazy imports included)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            for alias in node.names:  # `from benchmarks.study import report` imports a module
                found.add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module)
    return found


def test_benchmark_modules_import_each_other_by_package_name_without_cycles():
    """Scripts run by path needed sys.path edits and try/except imports, and run.py and report.py imported
    each other; a cycle breaks as soon as either is imported first from somewhere new."""
    graph, problems = {}, []
    for name, path in MODULES.items():
        source = path.read_text()
        tree = ast.parse(source)
        graph[name] = imported(tree) - {name}
        if "sys.path" in source:
            problems.append(f"{name} edits sys.path")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                problems.append(f"{name} imports relatively (from {'.' * node.level}{node.module or ''})")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                top = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                problems += [f"{name} imports {t!r} as a script would" for t in top if t.split(".")[0] in BASENAMES]
    assert not problems, problems
    assert any(graph.values()), "no imports found: the check reads nothing"

    def cycle_from(start: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(graph[start]):
            if nxt in path:
                return path[path.index(nxt):] + [nxt]
            found = cycle_from(nxt, path + [nxt])
            if found:
                return found
        return None

    cycles = [c for name in graph if (c := cycle_from(name, [name]))]
    assert not cycles, f"import cycles: {cycles[:3]}"


def test_importing_the_library_imports_no_benchmark_code():
    code = "import sys, ts_continuum; print(sorted(m for m in sys.modules if m.split('.')[0] == 'benchmarks'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
