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


def loaded_after(statement: str, modules: list[str]) -> list[str]:
    """Which of `modules` a fresh interpreter holds after `statement`."""
    code = f"import sys; {statement}; print([m for m in {modules!r} if sys.modules.get(m)])"
    return eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def test_the_evaluate_stage_loads_no_plots_or_model_sdk_until_asked():
    """Stage 03's imports (notebooks/03_evaluate.ipynb) with no model configured: seaborn and matplotlib load with
    the first plot, the OpenAI SDK with the first model call."""
    statement = ("from lobeval.analysis import analyse; import lobeval.evaluation.evaluate, lobeval.workflow.roles, "
                 "lobeval.simulation.simulate, lobeval.analysis.root_causes")
    assert loaded_after(statement, ["seaborn", "matplotlib", "openai", "azure.ai.evaluation"]) == []
    plotted = "; import pandas as pd; analyse._heatmap(pd.DataFrame({'s': [1.0]}, index=['f']), 'title', 'scale')"
    assert loaded_after(statement + plotted, ["seaborn", "matplotlib", "openai"]) == ["seaborn", "matplotlib"]


def test_scrapbook_in_a_stage_kernel_does_not_load_papermills_azure_blob_handler():
    assert loaded_after("import lobeval, scrapbook", ["scrapbook", "papermill.abs", "azure.storage.blob"]) == ["scrapbook"]
