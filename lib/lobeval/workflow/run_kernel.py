"""The kernel `lobeval run` executes its stage notebooks on: one for the run (RunKernel), started by the first stage
that runs and shut down after the last. Each notebook starts from an empty namespace, numbered from 1, as on a kernel
of its own; what the stages share is that the kernel starts once and the libraries they all use are imported once.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

from jupyter_client import AsyncKernelManager
from jupyter_core.utils import run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines
from traitlets.config import Config

# The kernel talks to papermill over local sockets, not TCP (which it warns about on every start); set here, so
# that it holds in any environment, not only one whose kernel spec is lobeval's (lobeval.workflow.kernel, for runs
# by hand).
LOCAL_KERNEL = Config({"KernelManager": {"transport": "ipc",
                                         "ip": os.path.join(tempfile.gettempdir(), f"lobeval-kernel-{os.getpid()}")}})


class FinishedKernelManager(AsyncKernelManager):
    """A run's kernel, shut down once its notebooks have run: nothing runs then that an interrupt should stop.
    jupyter_client interrupts a kernel (SIGINT) before it asks it to shut down, and papermill's last request
    (kernel_info, whose reply is all it waits for) may still be in its handler then: ipykernel catches the interrupt
    there and logs `[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.` on the run's standard error. So the
    shutdown is asked without the interrupt; a kernel that does not stop is still killed (`shutdown_wait_time`)."""

    async def _async_interrupt_kernel(self) -> None:
        if not self.shutting_down:
            await super()._async_interrupt_kernel()


QUIET_KERNEL = {"kernel_name": "python3", "progress_bar": False, "config": LOCAL_KERNEL,
                "kernel_manager_class": FinishedKernelManager}
"""How papermill runs a stage notebook: on local sockets, shut down without an interrupt, no progress bar; nothing on
standard error but what the notebook says."""
NO_BOT_STAGES = ("01_generate", "04_error_analysis", "05_report")
"""The stages in which no code of the bot runs: a run's kernel that ran none of the others is stopped at once, since
the graceful shutdown of a kernel that holds pandas, scipy and matplotlib takes 2-3 s and only a bot's exit handlers
need it."""
ENGINE = "lobeval-run-kernel"
"""The papermill engine that executes a notebook on a run's kernel (RunEngine)."""
FRESH_NAMESPACE = "get_ipython().reset(new_session=True, aggressive=False)"
"""Empties the namespace and numbers the cells from 1 again; the modules imported stay loaded."""


class RunClient(PapermillNotebookClient):
    """papermill's client on the run's kernel: the notebook starts from an empty namespace, as on a kernel of its
    own, and its connection is closed afterwards (nbclient leaves open its connection to a kernel it was lent)."""

    def papermill_execute_cells(self) -> None:
        self.wait_for_reply(self.kc.execute(FRESH_NAMESPACE, silent=True, store_history=False))
        super().papermill_execute_cells()

    def execute(self, **kwargs: Any) -> Any:
        try:
            return super().execute(**kwargs)
        finally:
            if self.kc is not None:
                self.kc.stop_channels()
                self.kc = None


class RunEngine(NBClientEngine):
    """papermill's nbclient engine with RunClient, given the run's kernel manager as `km`."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                 stdout_file: Any = None, stderr_file: Any = None, start_timeout: int = 60,
                                 execution_timeout: int | None = None, **kwargs: Any) -> Any:
        dropped = ("input_path", "timeout", "startup_timeout")   # papermill's names, given below by nbclient's
        kwargs = {key: value for key, value in kwargs.items() if key not in dropped}
        return RunClient(nb_man, kernel_name=kernel_name, log_output=log_output, stdout_file=stdout_file,
                         stderr_file=stderr_file, startup_timeout=start_timeout, timeout=execution_timeout,
                         **kwargs).execute()


papermill_engines.register(ENGINE, RunEngine)


class RunKernel:
    """The kernel a run's stage notebooks execute on, started by the first of them (in the run folder, papermill's
    `cwd`) and shut down by `close`: at once if only NO_BOT_STAGES ran on it, else gracefully, so that a bot's exit
    handlers run. A stage that fails ends the run, so a kernel in an unknown state never runs another stage."""

    def __init__(self) -> None:
        self.manager = FinishedKernelManager(config=LOCAL_KERNEL, kernel_name=QUIET_KERNEL["kernel_name"])
        self.bot_ran = False

    def papermill_options(self, stage: str) -> dict[str, Any]:
        """What papermill.execute_notebook is given to run `stage` on this kernel."""
        self.bot_ran = self.bot_ran or stage not in NO_BOT_STAGES
        return {**QUIET_KERNEL, "engine_name": ENGINE, "km": self.manager}

    def close(self) -> None:
        if self.manager.has_kernel:
            run_sync(self.manager.shutdown_kernel)(now=not self.bot_ran)
        run_sync(self.manager.cleanup_resources)()
