"""Stage 1 as the chain runs it: the notebook executed by papermill, its glue read back."""
import json

import pytest

from helpers import REPO, read_jsonl

pytestmark = pytest.mark.slow


def test_generate_notebook_writes_the_dataset_and_glues_its_path(tmp_path):
    import papermill
    import scrapbook

    out = tmp_path / "dataset.jsonl"
    executed = tmp_path / "01_generate.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "01_generate.ipynb"), str(executed),
                               parameters={"suite": str(REPO / "scenarios" / "support_tickets"),
                                           "cases_per_scenario": 2, "seed": 3, "out": str(out)},
                               kernel_name="python3", cwd=str(tmp_path), progress_bar=False)
    scraps = scrapbook.read_notebook(str(executed)).scraps
    cases = read_jsonl(out)
    templates = json.loads((REPO / "scenarios" / "support_tickets" / "templates.json").read_text())
    assert scraps["dataset_path"].data == str(out)
    assert scraps["n_cases"].data == len(cases) == 2 * len(templates)
    assert scraps["cases_per_scenario"].data == {t["scenario_name"]: 2 for t in templates}


def test_run_executes_the_built_stages_into_the_run_folder(tmp_path, monkeypatch):
    from lobeval import pipeline

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(pipeline, "RUNS", tmp_path / "runs")
    result = pipeline.run(suite="scenarios/support_tickets", run_id="t1", cases_per_scenario=1)
    assert result.run_dir == tmp_path / "runs" / "t1"
    assert (result.run_dir / "01_generate.ipynb").exists()
    assert result.dataset == result.run_dir / "dataset.jsonl"
    assert (result.run_dir / "02_simulate.ipynb").exists()
    n_cases = len(read_jsonl(result.dataset))
    assert len(read_jsonl(result.conversations)) == n_cases == sum(result.terminations.values()) > 0
    assert result.terminations == {"user_finished": n_cases}
    assert result.summary()[-1] == str(result.conversations)


def test_a_failing_stage_names_the_kept_notebook(tmp_path, monkeypatch):
    from lobeval import pipeline
    from lobeval.errors import LobevalError

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(pipeline, "RUNS", tmp_path / "runs")
    from helpers import TEMPLATE, make_suite

    suite = make_suite(tmp_path, templates=[{**TEMPLATE, "user_instructions": "{nope.x}"}])
    with pytest.raises(LobevalError, match=r"stage 01_generate failed \(RecordError: .*unknown placeholder \{nope.x\}"
                                           r".*kept at .*01_generate.ipynb"):
        pipeline.run(suite=str(suite), run_id="broken")
    assert (tmp_path / "runs" / "broken" / "01_generate.ipynb").exists()
