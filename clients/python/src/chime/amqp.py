"""Submissions published to chime's queue (``<prefix>.submit``) over AMQP, for publishers that
talk to RabbitMQ rather than the API (``pip install chime-client[amqp]``, which brings pika).

Each submission goes out with publisher confirms, an id (so a retried publish is one task), and
RabbitMQ's direct reply-to: a chime worker answers once the submission is recorded or refused,
and :meth:`Publisher.submit` returns the :class:`~chime.Task` then, or raises
:class:`Refused` with the reason the dead letter carries.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Dict, Optional

import pika
from pika.adapters.blocking_connection import BlockingChannel

from ._client import Client, Task, _task_body
from ._models import ChimeError, WaitTimeout

#: RabbitMQ's direct reply-to pseudo-queue.
REPLY_TO = "amq.rabbitmq.reply-to"


class Refused(ChimeError):
    """chime refused the submission (dead-lettered it): ``reason`` says why."""

    def __init__(self, id: Optional[str], reason: str) -> None:
        super().__init__(f"submission {id} refused: {reason}")
        self.id = id
        self.reason = reason


class Publisher:
    """Publishes submissions to ``<prefix>.submit`` at ``url`` (an AMQP URL). ``client`` makes
    the returned task handles (a :class:`~chime.Client` from the environment by default)."""

    def __init__(
        self,
        url: str = "amqp://guest:guest@127.0.0.1:5672/%2f",
        prefix: str = "chime",
        client: Optional[Client] = None,
    ) -> None:
        self.exchange = f"{prefix}.submit"
        self.client = client or Client()
        self._connection = pika.BlockingConnection(pika.URLParameters(url))
        self._channel: BlockingChannel = self._connection.channel()
        self._channel.confirm_delivery()
        self._replies: Dict[str, Dict[str, Any]] = {}
        self._channel.basic_consume(REPLY_TO, self._on_reply, auto_ack=True)

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._connection.is_open:
            self._connection.close()

    def _on_reply(self, _channel: Any, _method: Any, properties: Any, body: bytes) -> None:
        if properties.correlation_id:
            self._replies[properties.correlation_id] = json.loads(body)

    def submit(self, kind: str, timeout: float = 30.0, **fields: Any) -> Task:
        """Publishes a submission (:meth:`chime.Client.submit`'s arguments) and waits up to
        ``timeout`` seconds for chime's answer."""
        body = _task_body(kind, **fields)
        body["v"] = 1
        correlation = str(uuid.uuid4())
        self._channel.basic_publish(
            exchange=self.exchange,
            routing_key=self.exchange,
            body=json.dumps(body).encode(),
            properties=pika.BasicProperties(
                content_type="application/json",
                delivery_mode=2,
                message_id=body["id"],
                reply_to=REPLY_TO,
                correlation_id=correlation,
            ),
            mandatory=True,
        )
        deadline = time.monotonic() + timeout
        while correlation not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"no answer to submission {body['id']} within {timeout} s")
            self._connection.process_data_events(time_limit=min(left, 1.0))
        answer = self._replies.pop(correlation)
        # Answers to submissions given up on (timed out) are not kept for ever.
        self._replies.clear()
        if "refused" in answer:
            raise Refused(answer.get("id"), str(answer["refused"]))
        return Task(self.client, answer["id"])
