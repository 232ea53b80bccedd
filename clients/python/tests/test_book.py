"""The book's Python page, run: every ```python block of docs/src/how-to/python-client.md runs,
in order and in one namespace (as a reader pastes them into one session), against this suite's
`chime up`; where a ```text block follows one, what the block prints must be that text. A name
changed in the client fails here until the book follows."""

from __future__ import annotations

import contextlib
import io
import re
import signal
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from conftest import REPO, Chime

PAGE = REPO / "docs/src/how-to/python-client.md"


def examples(text: str) -> List[Tuple[int, str, Optional[str]]]:
    """(line, code, expected output or None) for each ```python block of `text`."""
    blocks = [
        (text.count("\n", 0, found.start()) + 1, found.group(1), found.group(2))
        for found in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)
    ]
    found: List[Tuple[int, str, Optional[str]]] = []
    for index, (line, language, body) in enumerate(blocks):
        if language != "python":
            continue
        after = blocks[index + 1] if index + 1 < len(blocks) else None
        expected = after[2] if after and after[1] == "text" else None
        found.append((line, body, expected))
    return found


def test_the_page_has_examples_with_their_output() -> None:
    found = examples(PAGE.read_text())
    assert len(found) >= 5
    assert all(expected is not None for _, _, expected in found)


def test_the_books_python_examples_print_what_the_book_shows(
    api: Chime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHIME_AMQP_URL", api.amqp)
    monkeypatch.setenv("CHIME_PREFIX", api.prefix)
    namespace: dict = {"__name__": "__book__"}

    # A follow without a deadline (task.logs) would otherwise wait for ever on a stuck task.
    def stuck(_signal: int, _frame: object) -> None:
        raise TimeoutError("an example of the Python page ran past 180 s")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(180)
    try:
        for line, code, expected in examples(PAGE.read_text()):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"{PAGE.name}:{line}", "exec"), namespace)
            if expected is not None:
                assert printed.getvalue() == expected, f"{PAGE.name}:{line} printed otherwise"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
