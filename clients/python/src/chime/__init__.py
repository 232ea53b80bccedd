"""chime's Python client: submit tasks to chime and wait for their results.

>>> import chime
>>> result = chime.Client().submit("shell", command=["echo", "hi"]).wait(timeout=30)
>>> result.status, result.exit_code, result.output
('succeeded', 0, 'hi\\n')
"""

from ._client import AsyncClient, AsyncJob, AsyncTask, Client, Job, Task
from ._models import ApiError, ChimeError, Result, TaskFailed, WaitTimeout

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncJob",
    "AsyncTask",
    "ChimeError",
    "Client",
    "Job",
    "Result",
    "Task",
    "TaskFailed",
    "WaitTimeout",
]
__version__ = "0.1.0"
