"""The package's wiring: imports flow one way, and a CI step such as `lobeval gate` stays light."""
import ast
import subprocess
import sys
from pathlib import Path

import lobeval

PACKAGE = Path(lobeval.__file__).parent


def imports() -> dict[str, set[str]]:
    """lobeval module → the lobeval modules it imports, at module level or inside a function: an import
    deferred into a function still ties the two modules together, so it may not close a circle either."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("lobeval", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        graph[name] = [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                       if isinstance(node, ast.Import | ast.ImportFrom)]
    edges = {}
    for name, nodes in graph.items():
        found = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif node.module and node.module.startswith("lobeval"):
                # `from package import submodule` depends on the submodule; `from module import name` on the module
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & graph.keys()
                found |= submodules or {node.module}
        edges[name] = {target for target in found if target in graph and target != name}
    return edges


def test_the_module_graph_has_no_cycle():
    graph = imports()
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            assert state.get(target) != "open", f"import cycle: {' -> '.join(path + [name, target])}"
            if target not in state:
                visit(target, path + [name])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_gate_and_compare_load_no_widgets_plots_judges_or_model_client():
    heavy = ["ipywidgets", "seaborn", "lobeval.judges.judges", "lobeval.models.llm", "openai", "azure.ai.evaluation"]
    code = f"import sys, lobeval.analysis.compare, lobeval.cli; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
