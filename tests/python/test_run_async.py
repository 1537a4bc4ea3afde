"""CompiledModule.run_async: awaitable calls that run with the GIL released on worker threads, complete in the
caller's event loop (which keeps running meanwhile), and whose cancellation stops the run itself."""
import asyncio
import threading

import numpy as np
import pytest

import cuvil

onnx = pytest.importorskip("onnx")
from test_run_control import FOREVER, X, counting_loop_model, m  # noqa: E402


@pytest.fixture(scope="module")
def loop_path(tmp_path_factory):
    return counting_loop_model(str(tmp_path_factory.mktemp("loop_async") / "loop.onnx"))


def test_results_match_the_blocking_call(loop_path):
    model = cuvil.load_onnx(loop_path)

    async def main():
        return await asyncio.gather(*(model.run_async(m(n), X) for n in range(8)))

    for n, y in enumerate(asyncio.run(main())):
        np.testing.assert_array_equal(y, model(m(n), X))
    with pytest.raises(cuvil.InputError):  # checked before anything runs, in the caller
        asyncio.run(model.run_async(X))


def test_the_loop_keeps_running_and_results_arrive_on_it(loop_path):
    model = cuvil.load_onnx(loop_path)

    async def main():
        loop_thread = threading.get_ident()
        ticks = 0
        task = asyncio.ensure_future(model.run_async(m(300_000), X))
        while not task.done():  # the loop is free while the model runs
            ticks += 1
            await asyncio.sleep(0.001)
        y = await task
        assert threading.get_ident() == loop_thread
        return ticks, y

    ticks, y = asyncio.run(main())
    np.testing.assert_array_equal(y, X + 300_000)
    assert ticks > 0


def test_cancelling_the_task_stops_that_run_only(loop_path):
    model = cuvil.load_onnx(loop_path)

    async def main():
        a = asyncio.ensure_future(model.run_async(m(FOREVER), X))
        b = asyncio.ensure_future(model.run_async(m(FOREVER), X))
        while model._model.executors_created < 2:  # both runs have started
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a
        assert not b.done()
        # a's run has stopped and given its executor back: this call reuses it instead of creating a third.
        np.testing.assert_array_equal(await model.run_async(m(5), X), X + 5)
        assert model._model.executors_created == 2
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b

    asyncio.run(asyncio.wait_for(main(), timeout=120))
