"""`lobeval run`: execute the stage notebooks with papermill into runs/<run_id>/.

Each stage's notebook is executed into the run folder and kept there; what a stage hands the
next is read back from the executed notebook's scrapbook glue.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import papermill
import scrapbook

from lobeval.errors import ConfigError, LobevalError
from lobeval.suite import load_suite

NOTEBOOKS = Path("notebooks")
RUNS = Path("runs")
PENDING_STAGES = ["03_evaluate", "04_error_analysis", "05_report"]


@dataclass
class RunResult:
    run_dir: Path
    dataset: Path
    conversations: Path
    terminations: dict[str, int]
    executed: list[Path] = field(default_factory=list)

    def summary(self) -> list[str]:
        lines = [f"executed {path}" for path in self.executed]
        lines.append(f"conversations ended: {self.terminations}")
        lines.append(f"not built yet: {', '.join(PENDING_STAGES)}; the run stops after simulation.")
        lines.append(str(self.conversations))
        return lines


def run(*, suite: str | Path, run_id: str | None = None, cases_per_scenario: int = 3,
        seed: int = 42, target: str | None = None) -> RunResult:
    if not NOTEBOOKS.is_dir():
        raise ConfigError(f"no {NOTEBOOKS}/ folder in {Path.cwd()}: run lobeval from the repository root")
    suite_dir = Path(suite).resolve()
    spec = load_suite(suite_dir)
    run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.name}"
    run_dir = (RUNS / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    executed = execute_stage("01_generate", run_dir, {
        "suite": str(suite_dir), "cases_per_scenario": cases_per_scenario, "seed": seed,
        "out": str(run_dir / "dataset.jsonl")})
    dataset = scrapbook.read_notebook(str(executed)).scraps["dataset_path"].data
    simulated = execute_stage("02_simulate", run_dir, {
        "dataset": dataset, "target": target or spec.default_target, "user": "scripted",
        "out": str(run_dir / "conversations.jsonl")})
    scraps = scrapbook.read_notebook(str(simulated)).scraps
    return RunResult(run_dir=run_dir, dataset=Path(dataset), conversations=Path(scraps["conversations_path"].data),
                     terminations=scraps["terminations"].data, executed=[executed, simulated])


def execute_stage(stage: str, run_dir: Path, parameters: dict) -> Path:
    """Execute one stage notebook into the run folder; a failure names the kept notebook."""
    output = run_dir / f"{stage}.ipynb"
    try:
        papermill.execute_notebook(str(NOTEBOOKS / f"{stage}.ipynb"), str(output), parameters=parameters,
                                   kernel_name="python3", cwd=str(run_dir), progress_bar=False)
    except papermill.PapermillExecutionError as exc:
        raise LobevalError(f"stage {stage} failed ({exc.ename}: {exc.evalue}); "
                           f"the executed notebook is kept at {output}") from None
    return output
