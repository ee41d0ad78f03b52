"""The kernel `lobeval run` executes its stage notebooks on (lobeval.workflow.run_kernel): one for the run, each
notebook starting from an empty namespace, numbered from 1."""
import os

import nbformat
import papermill
import pytest

from lobeval.workflow.run_kernel import RunKernel


def notebook(path, *sources):
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources]), str(path))
    return str(path)


def printed(executed):
    book = nbformat.read(str(executed), as_version=4)
    return ([cell.execution_count for cell in book.cells],
            ["".join(output.get("text", "") for output in cell.outputs).strip() for cell in book.cells])


@pytest.mark.slow
def test_the_stages_share_one_kernel_and_each_starts_from_an_empty_namespace(tmp_path):
    kernel = RunKernel()
    first = notebook(tmp_path / "a.ipynb", "import os, json\nleft = 'from a'", "print(os.getpid(), os.getcwd())")
    second = notebook(tmp_path / "b.ipynb", "import os, sys\nprint(os.getpid(), os.getcwd())",
                      "print('left' in globals(), 'json' in globals(), 'json' in sys.modules)")
    (tmp_path / "run").mkdir()
    try:
        papermill.execute_notebook(first, str(tmp_path / "a.out.ipynb"), cwd=str(tmp_path / "run"),
                                   **kernel.papermill_options("01_generate"))
        papermill.execute_notebook(second, str(tmp_path / "b.out.ipynb"), cwd=str(tmp_path / "run"),
                                   **kernel.papermill_options("04_error_analysis"))
        assert kernel.manager.has_kernel
    finally:
        kernel.close()
    counts_a, out_a = printed(tmp_path / "a.out.ipynb")
    counts_b, out_b = printed(tmp_path / "b.out.ipynb")
    pid, cwd = out_a[1].split()
    assert int(pid) != os.getpid() and cwd == str(tmp_path / "run")
    assert out_b == [f"{pid} {cwd}", "False False True"]   # the same kernel; a fresh namespace, the modules loaded
    assert counts_a == counts_b == [1, 2]
    assert not kernel.manager.has_kernel and not kernel.bot_ran   # stopped at once: no bot code ran on it


def test_a_kernel_that_ran_a_bot_stage_is_shut_down_gracefully_and_one_never_started_is_left_alone():
    kernel = RunKernel()
    kernel.close()   # no stage ran: nothing was started
    assert not kernel.manager.has_kernel
    options = kernel.papermill_options("02_simulate")
    assert kernel.bot_ran and options["km"] is kernel.manager and options["engine_name"] == "lobeval-run-kernel"
    kernel.papermill_options("05_report")
    assert kernel.bot_ran   # a later stage without bot code does not undo it
