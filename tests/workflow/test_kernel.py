"""A notebook run by hand (papermill, nbconvert, JupyterLab) runs on the kernel spec `make` installs
(`python -m lobeval.workflow.kernel`): its kernel talks over local IPC sockets and prints no warning about TCP."""
import asyncio
import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import install as install_ipykernel
from jupyter_client import KernelManager

from helpers import REPO
from lobeval.workflow import kernel

TCP_WARNING = "Kernel is running over TCP without encryption"
"""ipykernel's warning at the start of every kernel on TCP without CurveZMQ keys (ipykernel 7, IPKernelApp)."""
DEADLINE = 300
TRANSPORT = "from ipykernel.connect import get_connection_info\nprint(get_connection_info(unpack=True)['transport'])"


def declared_entry_point(site: Path) -> None:
    """Register the provisioner's entry point as pyproject.toml declares it, in a distribution of its own under
    `site`: the shared environment may have been installed before pyproject.toml declared it."""
    group = "jupyter_client.kernel_provisioners"
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"][group]
    assert declared == {kernel.PROVISIONER: "lobeval.workflow.kernel:LocalSocketsProvisioner"}
    info = site / "lobeval_kernel_entry_point-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lobeval-kernel-entry-point\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))


def run_by_hand(tmp_path: Path, spec_prefix: Path) -> tuple[subprocess.CompletedProcess, str]:
    """papermill's command line on a notebook that prints its kernel's transport, the kernel spec taken from
    `spec_prefix`: (the finished process, the transport the kernel printed)."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(TRANSPORT)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, str(tmp_path / "by_hand.ipynb"))
    env = {**os.environ, "JUPYTER_PATH": str(spec_prefix / "share" / "jupyter"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "lib")])}
    finished = subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", "by_hand.ipynb", "out.ipynb"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert finished.returncode == 0, finished.stderr
    outputs = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4).cells[0].outputs
    return finished, "".join(output.get("text", "") for output in outputs).strip()


def test_the_installed_kernel_spec_names_the_provisioner_and_keeps_ipykernels(tmp_path):
    folder = kernel.install(str(tmp_path))
    assert folder == tmp_path / "share" / "jupyter" / "kernels" / "python3"
    spec = json.loads((folder / "kernel.json").read_text(encoding="utf-8"))
    plain = json.loads((Path(install_ipykernel(prefix=str(tmp_path / "plain"))) / "kernel.json").read_text())
    assert spec["metadata"].pop("kernel_provisioner") == {"provisioner_name": "lobeval-local-sockets"}
    assert spec == plain


def test_a_notebook_run_by_hand_with_papermill_prints_no_tcp_warning(tmp_path):
    declared_entry_point(tmp_path / "site")
    kernel.install(str(tmp_path / "env"))
    finished, transport = run_by_hand(tmp_path, tmp_path / "env")
    assert transport == "ipc"
    assert TCP_WARNING not in finished.stderr and "[IPKernelApp]" not in finished.stderr


def test_ipykernels_own_spec_runs_over_tcp_and_warns(tmp_path):
    """The case above without lobeval's kernel spec: the warning it must not print, as ipykernel words it now."""
    install_ipykernel(prefix=str(tmp_path / "env"))
    finished, transport = run_by_hand(tmp_path, tmp_path / "env")
    assert transport == "tcp"
    assert f"[IPKernelApp] WARNING | {TCP_WARNING}." in finished.stderr


class Sent:
    """A LocalProvisioner's process, as far as send_signal uses it: the signals it received."""

    def __init__(self):
        self.signals = []

    def send_signal(self, signum):
        self.signals.append(signum)


@pytest.mark.parametrize("shutting_down, signum, delivered", [
    (True, signal.SIGINT, []),                  # the interrupt jupyter_client sends before every shutdown
    (False, signal.SIGINT, [signal.SIGINT]),    # an interrupt asked for (a cell's timeout, the stop button)
    (True, signal.SIGTERM, [signal.SIGTERM]),   # the ends of a shutdown are delivered
])
def test_the_provisioner_holds_back_only_the_interrupt_before_a_shutdown(shutting_down, signum, delivered):
    manager = KernelManager()
    manager.shutting_down = shutting_down
    provisioner = kernel.LocalSocketsProvisioner(kernel_id="k", kernel_spec=None, parent=manager)
    provisioner.process, provisioner.pgid = Sent(), None
    asyncio.run(provisioner.send_signal(signum))
    assert provisioner.process.signals == delivered
