"""The client against a real `chime up`: every method, failures, timeouts, a kill while waited
on, an API restarted while waiting, 1,000 tasks through submit_many + wait_all, asyncio, and
the AMQP publisher's answered submissions."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

import chime
from conftest import Chime


def test_submit_and_wait_in_two_lines(api: Chime) -> None:
    result = chime.Client().submit("shell", command=["echo", "hi"]).wait(timeout=60)
    assert result.status == "succeeded"
    assert result.exit_code == 0
    assert "hi" in result.output
    assert result.attempts == 1
    assert result.started_at is not None and result.finished_at is not None
    assert result.finished_at >= result.started_at


def test_a_failure_raises_with_its_exit_code_and_output(api: Chime) -> None:
    task = chime.Client().submit("shell", script="echo broken; exit 3")
    with pytest.raises(chime.TaskFailed) as failed:
        task.wait(timeout=60)
    assert failed.value.exit_code == 3
    assert "broken" in failed.value.output
    assert failed.value.status == "failed"
    result = task.wait(timeout=60, raise_on_failure=False)
    assert result.status == "failed" and result.exit_code == 3


def test_the_result_file_is_the_result(api: Chime) -> None:
    script = """echo '{"rows": 42}' > "$CHIME_RESULT_FILE" """
    result = chime.Client().submit("shell", script=script).wait(timeout=60)
    assert result.result == {"rows": 42}


def test_the_apis_refusals_are_exceptions_with_its_message(api: Chime) -> None:
    client = chime.Client()
    with pytest.raises(chime.ApiError) as refused:
        client.submit("teleport")
    assert refused.value.status == 400
    assert "teleport" in refused.value.message
    with pytest.raises(chime.ApiError) as missing:
        client.task(str(uuid.uuid4()))
    assert missing.value.status == 404
    with pytest.raises(ValueError):
        client.submit("shell", command=["true"], script="true")


def test_a_wait_times_out_and_the_task_goes_on(api: Chime) -> None:
    client = chime.Client()
    task = client.submit("shell", command=["sleep", "30"])
    started = time.monotonic()
    with pytest.raises(chime.WaitTimeout):
        task.wait(timeout=1.5)
    assert time.monotonic() - started < 10
    assert task.status in ("ready", "running")
    task.kill()


def test_a_task_killed_while_waited_on_raises_killed(api: Chime) -> None:
    client = chime.Client()
    task = client.submit("shell", command=["sleep", "60"])
    threading.Timer(1.0, task.kill).start()
    with pytest.raises(chime.TaskFailed) as killed:
        task.wait(timeout=60)
    assert killed.value.status == "killed"


def test_task_handles_kill_rerun_logs_and_jobs(api: Chime) -> None:
    client = chime.Client()
    task = client.submit("shell", script="echo one; echo two", id=str(uuid.uuid4()))
    assert task.wait(timeout=60).succeeded
    assert list(task.logs(follow=False)) == ["one", "two"]
    assert client.task(task.id).info["status"] == "succeeded"
    task.rerun()
    assert task.wait(timeout=60).attempts >= 1
    followed = client.submit("shell", script="echo a; sleep 1; echo b")
    assert list(followed.logs(follow=True)) == ["a", "b"]

    name = f"job-{uuid.uuid4().hex[:8]}"
    api.chime("job", "create", name, "--kind", "shell", "--", "echo", "from a job")
    result = client.job(name).run().wait(timeout=60)
    assert "from a job" in result.output


def test_a_thousand_tasks_through_submit_many_and_wait_all(api: Chime) -> None:
    client = chime.Client()
    tasks = client.submit_many({"kind": "noop"} for _ in range(1000))
    assert len({t.id for t in tasks}) == 1000
    results = client.wait_all(tasks, timeout=300)
    assert [r.status for r in results] == ["succeeded"] * 1000
    assert [r.id for r in results] == [t.id for t in tasks]


def test_two_hundred_noop_tasks_succeed(api: Chime) -> None:
    client = chime.Client()
    results = client.wait_all(client.submit_many({"kind": "noop"} for _ in range(200)), timeout=120)
    assert all(r.succeeded for r in results)


async def test_fifty_concurrent_submit_and_wait_with_asyncio(api: Chime) -> None:
    async with chime.AsyncClient() as client:

        async def one(n: int) -> chime.Result:
            task = await client.submit("shell", command=["echo", str(n)])
            return await task.wait(timeout=120)

        results = await asyncio.gather(*(one(n) for n in range(50)))
    assert all(r.succeeded for r in results)
    assert sorted(int(r.output) for r in results) == list(range(50))


async def test_the_async_client_has_the_same_methods(api: Chime) -> None:
    async with chime.AsyncClient() as client:
        task = await client.submit("shell", script="echo out; exit 4")
        with pytest.raises(chime.TaskFailed) as failed:
            await task.wait(timeout=60)
        assert failed.value.exit_code == 4
        assert [line async for line in task.logs(follow=False)] == ["out"]
        many = await client.submit_many([{"kind": "noop"}] * 20)
        assert all(r.succeeded for r in await client.wait_all(many, timeout=60))


def test_a_wait_resumes_across_an_api_restart(chime_up: Chime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHIME_API_URL", chime_up.url)
    client = chime.Client()
    task = client.submit("shell", command=["sleep", "4"])
    waited: "list[chime.Result]" = []
    waiter = threading.Thread(target=lambda: waited.append(task.wait(timeout=120)))
    waiter.start()
    time.sleep(1)
    chime_up.stop()
    chime_up.start()
    waiter.join(timeout=150)
    assert waited and waited[0].succeeded


def test_the_amqp_publisher_is_answered(api: Chime) -> None:
    amqp = pytest.importorskip("chime.amqp")
    with amqp.Publisher(api.amqp, prefix=api.prefix) as publisher:
        task = publisher.submit("shell", command=["echo", "over amqp"])
        assert "over amqp" in task.wait(timeout=60).output
        with pytest.raises(amqp.Refused) as refused:
            publisher.submit("teleport")
        assert "teleport" in refused.value.reason


def test_zz_a_token_from_the_environment_is_used(api: Chime, monkeypatch: pytest.MonkeyPatch) -> None:
    # Last in the file: a token turns authentication on for the installation until revoked.
    name = f"py-{uuid.uuid4().hex[:8]}"
    secret = api.chime("token", "create", name, "--role", "admin").strip().splitlines()[-1]
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                chime.Client(token="").submit("noop")
            except chime.ApiError as refused:
                assert refused.status == 401
                break
            assert time.monotonic() < deadline, "a token did not turn authentication on"
            time.sleep(0.5)
        monkeypatch.setenv("CHIME_API_TOKEN", secret)
        assert chime.Client().submit("shell", command=["echo", "hi"]).wait(timeout=60).succeeded
    finally:
        api.chime("--token", secret, "token", "revoke", name)
