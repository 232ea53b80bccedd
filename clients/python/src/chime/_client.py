"""The HTTP client, synchronous (:class:`Client`) and asyncio (:class:`AsyncClient`), over httpx.

A task is waited for by following the API's stream of task ends (``POST /api/v1/tasks/wait``,
server-sent events read with httpx-sse), not by polling: the answer comes once the task's end
reaches the API. If the stream breaks (the API restarted, a proxy closed it), the wait
reconnects and asks again for the tasks still pending; ends that came meanwhile are sent at once.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import (
    Any,
    AsyncIterator,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Union,
)
from urllib.parse import quote

import httpx
from httpx_sse import aconnect_sse, connect_sse

from ._models import ApiError, Result, TaskFailed, WaitTimeout

#: Where the API is when neither an argument nor ``CHIME_API_URL`` says.
DEFAULT_URL = "http://127.0.0.1:8080"
#: The most submissions sent in one ``POST /api/v1/tasks/batch``.
BATCH = 500
#: The most tasks one wait stream follows.
WAIT_CHUNK = 5000
#: How long a broken wait stream pauses before it reconnects.
RECONNECT_PAUSE = 0.5
#: The answers to a wait that are asked again rather than raised.
RETRIED = frozenset({429, 502, 503, 504})


def _task_body(
    kind: str,
    *,
    command: Optional[Sequence[str]] = None,
    script: Optional[str] = None,
    spec: Optional[Mapping[str, Any]] = None,
    data: Any = None,
    id: Optional[str] = None,
    name: Optional[str] = None,
    worker_group: Optional[str] = None,
    data_time: Optional[str] = None,
    priority: Optional[int] = None,
    timeout_ms: Optional[int] = None,
    reject_retries: Optional[int] = None,
    failed_retries: Optional[int] = None,
    execute_user: Optional[str] = None,
) -> Dict[str, Any]:
    """A submission as ``POST /api/v1/tasks`` takes it."""
    if command is not None and script is not None:
        raise ValueError("give command (an argv) or script (for sh -c), not both")
    if isinstance(command, str):
        raise TypeError("command is an argv (a list of strings); a string goes in script=")
    body: Dict[str, Any] = {"kind": kind}
    full_spec: Dict[str, Any] = dict(spec or {})
    if command is not None:
        full_spec["command"] = [str(part) for part in command]
    if script is not None:
        full_spec["command"] = script
    if full_spec:
        body["spec"] = full_spec
    optional = {
        "data": data,
        "id": None if id is None else str(id),
        "name": name,
        "group": worker_group,
        "data_time": data_time,
        "priority": priority,
        "timeout_ms": timeout_ms,
        "reject_retries": reject_retries,
        "failed_retries": failed_retries,
        "execute_user": execute_user,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    # An id of the client's own: a submission retried after a lost answer is one task.
    body.setdefault("id", str(uuid.uuid4()))
    return body


def _error(response: httpx.Response) -> ApiError:
    try:
        message = response.json().get("error") or response.text
    except ValueError:
        message = response.text
    return ApiError(response.status_code, message)


def _headers(token: Optional[str]) -> Dict[str, str]:
    headers = {"user-agent": "chime-client-python/0.1"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def _outcome(result: Result, raise_on_failure: bool) -> Result:
    if raise_on_failure and not result.succeeded:
        raise TaskFailed(result)
    return result


def _read_timeout(left: Optional[float]) -> float:
    """A wait's read timeout. With a deadline, shorter than the API's keep-alive (15 s), so that
    the deadline is met even while keep-alives arrive; without one, three keep-alives, so that
    a connection gone half-open is noticed and the stream asked for again."""
    return 45.0 if left is None else max(0.001, min(left, 10.0))


def _id(task: Any) -> str:
    """A task id as the API writes it (a UUID in lower case with hyphens)."""
    return str(uuid.UUID(str(task)))


def _pause(deadline: Optional[float]) -> float:
    """How long a wait pauses before it asks again: a moment, never past its deadline."""
    left = _remaining(deadline)
    return RECONNECT_PAUSE if left is None else max(0.0, min(RECONNECT_PAUSE, left))


def _remaining(deadline: Optional[float]) -> Optional[float]:
    if deadline is None:
        return None
    return deadline - time.monotonic()


def _run_request(
    group: str, name: str, data_time: Optional[str], data: Any
) -> "tuple[str, Dict[str, Any]]":
    """The path and body of ``POST /api/v1/jobs/{group}/{name}/run``."""
    body: Dict[str, Any] = {}
    if data_time is not None:
        body["data_time"] = data_time
    if data is not None:
        body["data"] = data
    return f"/api/v1/jobs/{quote(group, safe='')}/{quote(name, safe='')}/run", body


def _take(event: Any, pending: "set[str]", ended: Dict[str, Result]) -> bool:
    """Takes one event of a wait stream into ``pending`` and ``ended``; True at ``done``."""
    if event.event == "ended":
        result = Result.from_task(event.json())
        pending.discard(result.id)
        ended[result.id] = result
    elif event.event == "missing":
        raise ApiError(404, f"task {event.json().get('id')} not found")
    return event.event == "done"


class Task:
    """A task of a :class:`Client`, by id."""

    def __init__(self, client: "Client", id: str, info: Optional[Dict[str, Any]] = None):
        self.client = client
        self.id = _id(id)
        #: The task as last read (None until read).
        self.info = info

    def __repr__(self) -> str:
        return f"Task({self.id!r})"

    def refresh(self) -> Dict[str, Any]:
        """Reads the task again (``GET /api/v1/tasks/{id}``)."""
        self.info = self.client._call("GET", f"/api/v1/tasks/{self.id}")
        return self.info

    @property
    def status(self) -> str:
        return str(self.refresh()["status"])

    def wait(self, timeout: Optional[float] = None, raise_on_failure: bool = True) -> Result:
        """Waits for the task to end and returns how; raises :class:`TaskFailed` if it did not
        succeed (unless ``raise_on_failure=False``) and :class:`WaitTimeout` after ``timeout``
        seconds."""
        result = self.client._wait([self.id], timeout)[self.id]
        return _outcome(result, raise_on_failure)

    def kill(self) -> Dict[str, Any]:
        """Kills the task (a running attempt is stopped)."""
        self.info = self.client._call("POST", f"/api/v1/tasks/{self.id}/kill")
        return self.info

    def rerun(self, downstream: bool = False) -> "Task":
        """Runs the ended task again (with ``downstream``, the tasks it feeds too)."""
        self.client._call(
            "POST",
            f"/api/v1/tasks/{self.id}/rerun",
            params={"downstream": "true"} if downstream else None,
        )
        return self

    def logs(self, follow: bool = True) -> Iterator[str]:
        """The task's output, line by line; followed, as it is written until the task ends."""
        if not follow:
            text = self.client._text(f"/api/v1/tasks/{self.id}/logs")
            yield from text.splitlines()
            return
        pending = ""
        with connect_sse(
            self.client._http,
            "GET",
            f"/api/v1/tasks/{self.id}/logs",
            params={"follow": "true"},
            timeout=httpx.Timeout(10.0, read=None),
        ) as source:
            if source.response.status_code != 200:
                source.response.read()
                raise _error(source.response)
            for event in source.iter_sse():
                if event.event == "output":
                    pending += event.json().get("text", "")
                    *lines, pending = pending.split("\n")
                    yield from lines
                elif event.event == "attempt" and pending:
                    # A new attempt: the last one's unfinished line ends here.
                    yield pending
                    pending = ""
                elif event.event == "end":
                    break
        if pending:
            yield pending


class Job:
    """A job of a :class:`Client`, by group and name."""

    def __init__(self, client: "Client", name: str, group: str = "default"):
        self.client, self.name, self.group = client, name, group

    def run(self, data_time: Optional[str] = None, data: Any = None) -> Task:
        """Runs the job now (for ``data_time``, an RFC 3339 time, if given)."""
        path, body = _run_request(self.group, self.name, data_time, data)
        answer = self.client._call("POST", path, json=body)
        return Task(self.client, answer["task_id"])


class Client:
    """A client of chime's API. ``url`` and ``token`` default to ``CHIME_API_URL`` and
    ``CHIME_API_TOKEN``, as the CLI's do."""

    def __init__(
        self, url: Optional[str] = None, token: Optional[str] = None, timeout: float = 30.0
    ) -> None:
        self.url = (url or os.environ.get("CHIME_API_URL") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("CHIME_API_TOKEN")
        self._http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response.json()

    def _text(self, path: str) -> str:
        response = self._http.get(path)
        if response.status_code >= 400:
            raise _error(response)
        return response.text

    def submit(self, kind: str, **fields: Any) -> Task:
        """Submits a task (``POST /api/v1/tasks``): ``command`` (an argv) or ``script`` for the
        shell kind, ``spec``, ``data``, ``id``, ``name``, ``worker_group``, ``data_time``,
        ``priority``, ``timeout_ms``, ``reject_retries``, ``failed_retries``, ``execute_user``."""
        task = self._call("POST", "/api/v1/tasks", json=_task_body(kind, **fields))
        return Task(self, task["id"], task)

    def submit_many(self, submissions: Iterable[Mapping[str, Any]]) -> List[Task]:
        """Submits many tasks through ``POST /api/v1/tasks/batch``, in chunks; each submission is
        a mapping of :meth:`submit`'s arguments (``kind`` included). A chunk is all or nothing."""
        bodies = [_task_body(**dict(s)) for s in submissions]
        tasks: List[Task] = []
        for start in range(0, len(bodies), BATCH):
            answer = self._call(
                "POST", "/api/v1/tasks/batch", json={"tasks": bodies[start : start + BATCH]}
            )
            tasks.extend(Task(self, t["id"]) for t in answer["tasks"])
        return tasks

    def task(self, id: str) -> Task:
        """A task by id (read at once, so an id no task has raises :class:`ApiError` 404)."""
        task = Task(self, id)
        task.refresh()
        return task

    def job(self, name: str, group: str = "default") -> Job:
        """A job by name and group."""
        return Job(self, name, group)

    def wait_all(
        self,
        tasks: Iterable[Union[Task, str]],
        timeout: Optional[float] = None,
        raise_on_failure: bool = True,
    ) -> List[Result]:
        """Waits for every task over one stream and returns their results in the order given;
        the first one that did not succeed raises :class:`TaskFailed` (once all have ended)
        unless ``raise_on_failure=False``."""
        ids = [t.id if isinstance(t, Task) else _id(t) for t in tasks]
        ended: Dict[str, Result] = {}
        deadline = None if timeout is None else time.monotonic() + timeout
        for start in range(0, len(ids), WAIT_CHUNK):
            ended.update(self._wait(ids[start : start + WAIT_CHUNK], timeout, deadline))
        results = [ended[i] for i in ids]
        for result in results:
            _outcome(result, raise_on_failure)
        return results

    def _wait(
        self, ids: Sequence[str], timeout: Optional[float], deadline: Optional[float] = None
    ) -> Dict[str, Result]:
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        pending = set(ids)
        ended: Dict[str, Result] = {}
        while pending:
            left = _remaining(deadline)
            if left is not None and left <= 0:
                raise WaitTimeout(f"{len(pending)} task(s) had not ended after {timeout} s")
            try:
                with connect_sse(
                    self._http,
                    "POST",
                    "/api/v1/tasks/wait",
                    json={"ids": sorted(pending)},
                    timeout=httpx.Timeout(10.0, read=_read_timeout(left)),
                ) as source:
                    if source.response.status_code in RETRIED:
                        # Every stream this token may hold is open, or the API is short of its
                        # database: ask again in a moment.
                        time.sleep(_pause(deadline))
                        continue
                    if source.response.status_code != 200:
                        source.response.read()
                        raise _error(source.response)
                    for event in source.iter_sse():
                        if _take(event, pending, ended):
                            break
            except httpx.TransportError:
                # The API went away or the read timed out: past the deadline the loop ends;
                # before it, the stream is asked for again.
                time.sleep(_pause(deadline))
        return ended


class AsyncTask:
    """A task of an :class:`AsyncClient`, by id: :class:`Task`'s methods as coroutines."""

    def __init__(self, client: "AsyncClient", id: str, info: Optional[Dict[str, Any]] = None):
        self.client = client
        self.id = _id(id)
        self.info = info

    def __repr__(self) -> str:
        return f"AsyncTask({self.id!r})"

    async def refresh(self) -> Dict[str, Any]:
        self.info = await self.client._call("GET", f"/api/v1/tasks/{self.id}")
        return self.info

    async def wait(self, timeout: Optional[float] = None, raise_on_failure: bool = True) -> Result:
        result = (await self.client._wait([self.id], timeout))[self.id]
        return _outcome(result, raise_on_failure)

    async def kill(self) -> Dict[str, Any]:
        self.info = await self.client._call("POST", f"/api/v1/tasks/{self.id}/kill")
        return self.info

    async def rerun(self, downstream: bool = False) -> "AsyncTask":
        await self.client._call(
            "POST",
            f"/api/v1/tasks/{self.id}/rerun",
            params={"downstream": "true"} if downstream else None,
        )
        return self

    async def logs(self, follow: bool = True) -> AsyncIterator[str]:
        if not follow:
            response = await self.client._http.get(f"/api/v1/tasks/{self.id}/logs")
            if response.status_code >= 400:
                raise _error(response)
            for line in response.text.splitlines():
                yield line
            return
        pending = ""
        async with aconnect_sse(
            self.client._http,
            "GET",
            f"/api/v1/tasks/{self.id}/logs",
            params={"follow": "true"},
            timeout=httpx.Timeout(10.0, read=None),
        ) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise _error(source.response)
            async for event in source.aiter_sse():
                if event.event == "output":
                    pending += event.json().get("text", "")
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        yield line
                elif event.event == "attempt" and pending:
                    yield pending
                    pending = ""
                elif event.event == "end":
                    break
        if pending:
            yield pending


class AsyncJob:
    """A job of an :class:`AsyncClient`."""

    def __init__(self, client: "AsyncClient", name: str, group: str = "default"):
        self.client, self.name, self.group = client, name, group

    async def run(self, data_time: Optional[str] = None, data: Any = None) -> AsyncTask:
        path, body = _run_request(self.group, self.name, data_time, data)
        answer = await self.client._call("POST", path, json=body)
        return AsyncTask(self.client, answer["task_id"])


class AsyncClient:
    """:class:`Client` for asyncio: the same methods as coroutines; use ``async with``."""

    def __init__(
        self, url: Optional[str] = None, token: Optional[str] = None, timeout: float = 30.0
    ) -> None:
        self.url = (url or os.environ.get("CHIME_API_URL") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("CHIME_API_TOKEN")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=_headers(token), timeout=timeout
        )

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response.json()

    async def submit(self, kind: str, **fields: Any) -> AsyncTask:
        task = await self._call("POST", "/api/v1/tasks", json=_task_body(kind, **fields))
        return AsyncTask(self, task["id"], task)

    async def submit_many(self, submissions: Iterable[Mapping[str, Any]]) -> List[AsyncTask]:
        bodies = [_task_body(**dict(s)) for s in submissions]
        tasks: List[AsyncTask] = []
        for start in range(0, len(bodies), BATCH):
            answer = await self._call(
                "POST", "/api/v1/tasks/batch", json={"tasks": bodies[start : start + BATCH]}
            )
            tasks.extend(AsyncTask(self, t["id"]) for t in answer["tasks"])
        return tasks

    async def task(self, id: str) -> AsyncTask:
        task = AsyncTask(self, id)
        await task.refresh()
        return task

    def job(self, name: str, group: str = "default") -> AsyncJob:
        return AsyncJob(self, name, group)

    async def wait_all(
        self,
        tasks: Iterable[Union[AsyncTask, str]],
        timeout: Optional[float] = None,
        raise_on_failure: bool = True,
    ) -> List[Result]:
        ids = [t.id if isinstance(t, AsyncTask) else _id(t) for t in tasks]
        ended: Dict[str, Result] = {}
        deadline = None if timeout is None else time.monotonic() + timeout
        for start in range(0, len(ids), WAIT_CHUNK):
            ended.update(await self._wait(ids[start : start + WAIT_CHUNK], timeout, deadline))
        results = [ended[i] for i in ids]
        for result in results:
            _outcome(result, raise_on_failure)
        return results

    async def _wait(
        self, ids: Sequence[str], timeout: Optional[float], deadline: Optional[float] = None
    ) -> Dict[str, Result]:
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        pending = set(ids)
        ended: Dict[str, Result] = {}
        while pending:
            left = _remaining(deadline)
            if left is not None and left <= 0:
                raise WaitTimeout(f"{len(pending)} task(s) had not ended after {timeout} s")
            try:
                async with aconnect_sse(
                    self._http,
                    "POST",
                    "/api/v1/tasks/wait",
                    json={"ids": sorted(pending)},
                    timeout=httpx.Timeout(10.0, read=_read_timeout(left)),
                ) as source:
                    if source.response.status_code in RETRIED:
                        # Every stream this token may hold is open, or the API is short of its
                        # database: ask again in a moment.
                        await asyncio.sleep(_pause(deadline))
                        continue
                    if source.response.status_code != 200:
                        await source.response.aread()
                        raise _error(source.response)
                    async for event in source.aiter_sse():
                        if _take(event, pending, ended):
                            break
            except httpx.TransportError:
                await asyncio.sleep(_pause(deadline))
        return ended
