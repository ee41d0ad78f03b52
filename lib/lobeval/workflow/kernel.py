"""The kernel the notebooks run on: ipykernel's `python3` kernel spec, whose kernels talk over local (IPC) sockets.

ipykernel warns at every start of a kernel that listens on TCP without encryption (`Kernel is running over TCP
without encryption`). `lobeval run` configures its own kernels for IPC (`run_kernel.LOCAL_KERNEL`), but a notebook run
by hand is started by JupyterLab, nbconvert or papermill, and papermill reads no Jupyter configuration file. All of
them read the kernel spec, which may name a kernel provisioner (jupyter_client's extension point, found through the
entry point pyproject.toml declares): LocalSocketsProvisioner is jupyter_client's own local provisioner, moving a
kernel that would listen on localhost's TCP ports to IPC sockets in Jupyter's runtime folder (private to the user)
before the connection file is written. `python -m lobeval.workflow.kernel` installs the spec into the environment (`make` runs
it when it sets the environment up).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.localinterfaces import localhost
from jupyter_client.provisioning import LocalProvisioner
from jupyter_core.paths import jupyter_runtime_dir

KERNEL_NAME = "python3"
PROVISIONER = "lobeval-local-sockets"
"""LocalSocketsProvisioner's entry point (pyproject.toml, group jupyter_client.kernel_provisioners)."""


class LocalSocketsProvisioner(LocalProvisioner):
    """A local kernel on IPC sockets, unless its manager was given another transport or address (or the system has no
    IPC sockets): then as jupyter_client starts it."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        manager = self.parent
        if manager is not None and manager.transport == "tcp" and manager.ip == localhost() and zmq.has("ipc"):
            runtime = Path(jupyter_runtime_dir())
            runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
            manager.transport, manager.ip = "ipc", str(runtime / f"kernel-{self.kernel_id}-ipc")
            manager.cache_ports = False   # a cache of TCP ports: IPC sockets are files
        return await super().pre_launch(**kwargs)

    async def send_signal(self, signum: int) -> None:
        # jupyter_client interrupts every kernel before it asks it to shut down. A kernel caught between sending a
        # reply and restoring its SIGINT handler logs "KeyboardInterrupt caught in kernel." on the notebook's stderr.
        # The shutdown request goes over the control channel, which a busy kernel answers too; a kernel that still
        # does not stop is killed after jupyter_client's shutdown_wait_time.
        if signum == signal.SIGINT and getattr(self.parent, "shutting_down", False):
            return
        await super().send_signal(signum)


def install(prefix: str = sys.prefix) -> Path:
    """Install ipykernel's `python3` kernel spec under `prefix` (share/jupyter/kernels/python3, as `ipykernel install
    --prefix` does), naming LocalSocketsProvisioner in its metadata; returns the spec's folder."""
    from ipykernel.kernelspec import install as install_ipykernel

    folder = Path(install_ipykernel(kernel_name=KERNEL_NAME, prefix=prefix))
    spec_file = folder / "kernel.json"
    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    spec.setdefault("metadata", {})["kernel_provisioner"] = {"provisioner_name": PROVISIONER}
    spec_file.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lobeval.workflow.kernel", description=__doc__.split("\n")[0])
    parser.add_argument("--prefix", default=sys.prefix,
                        help="the environment to install the kernel spec into (default: this Python's, %(default)s)")
    print(install(parser.parse_args(argv).prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
