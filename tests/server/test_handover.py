"""NotebookKernels' hand-over on a real kernel a real Jupyter server started: a run approved
while a cell waits (`answered()`) goes to that cell; the bounds of any run hold for it (the
output cut to what a model is shown, the run-time limit interrupting it); only the kernel's own
proof takes or gives. The waiting cell is played here by the test's own calls of take/give:
tests/system/test_answered.py runs the real one in a kernel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conch_jupyter.notebook.handover import NotHanded, handover_proof
from conch_jupyter.notebook.kernel import NotebookKernels
from conch_jupyter.notebook.rules import OUTPUT_LIMIT

from ..support import notebook_kernels
from ..support.notebook_kernels import NotebookKernel

pytestmark = pytest.mark.timeout(120)
kernel = notebook_kernels.kernel  # the fixture: a real ipykernel for work.ipynb


def kernels_of(serverapp: Any, run_seconds: float = 30.0) -> NotebookKernels:
    return NotebookKernels(
        sessions=serverapp.session_manager,
        kernels=serverapp.kernel_manager,
        contents=serverapp.contents_manager,
        run_seconds=run_seconds,
    )


def proof_of(serverapp: Any, kernel: NotebookKernel) -> str:
    key = serverapp.kernel_manager.get_kernel(kernel.kernel_id).session.key
    return handover_proof(key, kernel.kernel_id)


async def test_a_handed_runs_output_is_bounded_as_any_runs(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    kernels, proof = kernels_of(jp_serverapp), proof_of(jp_serverapp, kernel)
    states: list[str] = []
    waiter = asyncio.ensure_future(kernels.take(kernel.kernel_id, proof, 10))
    await asyncio.sleep(0.1)
    run = asyncio.ensure_future(kernels.run(kernel.path, "print('x' * 50_000)", states.append))
    handed = await waiter
    assert handed is not None
    assert handed.code == "print('x' * 50_000)"  # exactly what was approved
    kernels.give(kernel.kernel_id, proof, handed.id, "x" * 50_000 + "\n", 50_001, False)
    result = await run
    assert result.ending == "ran"
    assert len(result.output) <= OUTPUT_LIMIT
    assert "Output cut: 50,001 characters" in result.output
    assert states == ["running"]
    with pytest.raises(NotHanded):  # given once; never again
        kernels.give(kernel.kernel_id, proof, handed.id, "again", 5, False)
    await kernels.close()


async def test_a_handed_run_past_its_limit_is_interrupted_in_words(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    kernels, proof = kernels_of(jp_serverapp, run_seconds=1.0), proof_of(jp_serverapp, kernel)
    waiter = asyncio.ensure_future(kernels.take(kernel.kernel_id, proof, 10))
    await asyncio.sleep(0.1)
    result = await asyncio.wait_for(kernels.run(kernel.path, "1", lambda state: None), 20)
    assert (await waiter) is not None
    assert result.ending == "timeout"  # the cell never gave it back: the limit ended it
    assert (await kernel.run("1 + 1"))["output"] == "2"  # the kernel still works
    await kernels.close()


async def test_without_a_waiting_cell_a_run_goes_to_the_kernel_as_before(
    jp_serverapp: Any, kernel: NotebookKernel
) -> None:
    kernels = kernels_of(jp_serverapp)
    result = await kernels.run(kernel.path, "6 * 7", lambda state: None)
    assert (result.ending, result.output.strip()) == ("ran", "42")
    await kernels.close()


async def test_only_the_kernels_own_proof_takes(jp_serverapp: Any, kernel: NotebookKernel) -> None:
    kernels = kernels_of(jp_serverapp)
    with pytest.raises(NotHanded) as refused:
        await kernels.take(kernel.kernel_id, "0" * 64, 0)
    assert refused.value.code == "not_this_kernel"
    with pytest.raises(NotHanded):
        await kernels.take("no-such-kernel", proof_of(jp_serverapp, kernel), 0)
    assert await kernels.take(kernel.kernel_id, proof_of(jp_serverapp, kernel), 0) is None
    await kernels.close()
