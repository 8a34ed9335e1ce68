"""The layers' import rules, read from the source: imports run one way, webhooks/ → bot/ →
memory/ → prompts/, with no loop between modules (bench/ and loopback/ included); bench/ and
loopback/ (what bench/ and tests/ share) never import tests/.

Every import statement counts, wherever it stands: at the top, inside a function (a lazy
import still ties the modules together) or under `if TYPE_CHECKING:` (a type is a
dependency too). A module importing its own package's __init__ is not an edge: Python runs
the package first anyway."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("webhooks", "bot", "memory", "prompts")  # highest first
SCANNED = (*PRODUCT, "bench", "loopback")
PROJECT = (*SCANNED, "tests")
# The packages each package may not import (besides itself, anything not named is allowed).
FORBIDDEN = {
    "prompts": {"memory", "bot", "webhooks", "bench", "loopback", "tests"},
    "memory": {"bot", "webhooks", "bench", "loopback", "tests"},
    "bot": {"webhooks", "bench", "loopback", "tests"},
    "webhooks": {"bench", "loopback", "tests"},
    "bench": {"tests"},
    "loopback": {"tests", "bench"},
}


@dataclass(frozen=True)
class Edge:
    """One import statement of `source` that reaches `target` (a module or package)."""

    source: str
    target: str
    where: str  # path:line
    statement: str

    def __str__(self) -> str:
        return f"{self.source} imports {self.target} ({self.where}: {self.statement})"


def module_name(path: Path) -> str:
    """The dotted name of the module at `path` (relative to the repository root)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(*packages: str) -> dict[str, Path]:
    """Every module of `packages`, by dotted name."""
    return {
        module_name(path): path
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imported_names(node: ast.Import | ast.ImportFrom, source: str, is_package: bool) -> list[str]:
    """The dotted names one import statement reaches (`from a import b` reaches a.b, which
    may be a module or a name in a), relative imports resolved against `source`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = source.split(".") if is_package else source.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" for alias in node.names]


def resolve(name: str, known: Mapping[str, Path]) -> str:
    """The longest prefix of `name` that is a known module (a.b.C → a.b), else `name`."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return name


def edges_of(source: str, path: Path, known: Mapping[str, Path]) -> list[Edge]:
    """The edges from module `source` (read from `path`) to the project's packages, one per
    statement and target, in file order. An edge to one of its own packages is left out."""
    text = path.read_text(encoding="utf-8")
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    edges: list[Edge] = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = imported_names(node, source, is_package=path.name == "__init__.py")
        statement = " ".join((ast.get_source_segment(text, node) or ast.dump(node)).split())
        edges.extend(
            Edge(source, target, f"{where}:{node.lineno}", statement)
            for target in sorted({resolve(name, known) for name in names})
            if target.split(".")[0] in PROJECT
            and target != source
            and not source.startswith(target + ".")
        )
    return sorted(edges, key=lambda edge: (int(edge.where.rsplit(":", 1)[1]), edge.target))


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The loops of `graph`: for each strongly connected group of nodes (Tarjan's algorithm),
    the shortest loop through each of its members (a breadth-first search inside the group),
    each loop once, written from its smallest node, e.g. [a, b, a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    loops = {rotated(shortest_cycle(graph, node, group)) for group in groups for node in group}
    return sorted(list(loop) for loop in loops)


def rotated(cycle: list[str]) -> tuple[str, ...]:
    """`cycle` (first node repeated at the end) written from its smallest node."""
    nodes = cycle[:-1]
    start = nodes.index(min(nodes))
    return (*nodes[start:], *nodes[:start], nodes[start])


def shortest_cycle(graph: Mapping[str, Iterable[str]], start: str, group: set[str]) -> list[str]:
    """The shortest path from `start` back to itself through `group`."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt in group and nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in no cycle")  # unreachable for a strongly connected group


KNOWN = modules_of(*PROJECT)
EDGES = [edge for name in modules_of(*SCANNED) for edge in edges_of(name, KNOWN[name], KNOWN)]


@pytest.mark.parametrize("package", list(FORBIDDEN))
def test_imports_run_one_way(package: str) -> None:
    """memory/ imports neither bot/ nor webhooks/, bot/ not webhooks/, prompts/ no other
    package; bench/ and loopback/ never tests/; no product package imports test code."""
    offending = [
        edge
        for edge in EDGES
        if edge.source.split(".")[0] == package and edge.target.split(".")[0] in FORBIDDEN[package]
    ]
    allowed = sorted(set(SCANNED) - FORBIDDEN[package] - {package})
    assert not offending, "\n  ".join(
        [f"{package}/ may import only itself, {', '.join(allowed)} and outside libraries:"]
        + [str(edge) for edge in offending]
    )


def test_no_import_loops() -> None:
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], Edge] = {}
    for edge in EDGES:
        graph.setdefault(edge.source, set()).add(edge.target)
        lines.setdefault((edge.source, edge.target), edge)
    cycles = find_cycles(graph)
    described = [
        " → ".join(cycle) + "".join(f"\n    {lines[pair]}" for pair in pairwise(cycle))
        for cycle in cycles
    ]
    assert not cycles, "import loops (lazy and TYPE_CHECKING imports count):\n  " + "\n  ".join(
        described
    )


def test_cycle_finder_on_a_toy_graph() -> None:
    graph = {
        "a": {"b"},
        "b": {"c", "e"},
        "c": {"a", "d"},  # a → b → c → a
        "d": set(),
        "e": {"f"},
        "f": {"e"},  # e ⇄ f, reached from the first loop but not part of it
        "g": {"g"},  # a module importing itself
        "h": {"a"},  # leads into a loop, is in none
    }
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"], ["g", "g"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    # One group, two loops: each is reported, once, whichever member it is found from.
    assert find_cycles({"x": {"y"}, "y": {"x", "z"}, "z": {"y"}}) == [
        ["x", "y", "x"],
        ["y", "z", "y"],
    ]


def test_the_scan_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Relative, lazy and TYPE_CHECKING imports are edges; `from a import b` reaches the
    module a.b when there is one, the package a otherwise; outside libraries are no edge."""
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import sqlalchemy.orm\n"
        "import memory.queue\n"
        "from . import tutor\n"
        "from .settings import Settings\n"
        "if TYPE_CHECKING:\n"
        "    from webhooks.wiring import build\n"
        "def later() -> None:\n"
        "    from tests.support import wait_until\n"
        "    from bot import runtime, not_a_module\n",
        encoding="utf-8",
    )
    edges = edges_of("bot.sample", source, KNOWN)
    assert [(edge.target, edge.where.rsplit(":", 1)[1]) for edge in edges] == [
        ("memory.queue", "3"),
        ("bot.tutor", "4"),
        ("bot.settings", "5"),
        ("webhooks.wiring", "7"),
        ("tests.support", "9"),
        ("bot.runtime", "10"),
    ]
