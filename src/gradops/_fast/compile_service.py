"""The compile process of ``first_calls``: ``python -m gradops._fast.compile_service``.

Reads requests from stdin, each a little-endian uint64 length and a pickled ``(number, recipe,
numba argument types)``, compiles those kernels one at a time into the disk cache
(``first_calls.make_kernel``, ``Dispatcher.compile``) and answers one line per request on stdout:
``<number> ok`` or ``<number> failed <reason>``. It ends with its parent: at the end of its input
(the parent closed the pipe or exited) it exits at once, even in the middle of a compile, so that
a program leaves no process behind (what was compiled by then is cached; numba replaces a cache
file whole). It runs at a lower priority than its parent, whose calls it must not slow down.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import sys
import threading


def _read_exactly(stream, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def _read_requests(stream, requests: queue.SimpleQueue) -> None:
    """Queue each request; at the end of the input, end the process."""
    while (header := _read_exactly(stream, 8)) is not None:
        frame = _read_exactly(stream, struct.unpack("<Q", header)[0])
        if frame is None:
            break
        requests.put(pickle.loads(frame))
    sys.stdout.flush()
    os._exit(0)  # the parent is gone or done: no compile of this process is needed any more


def main() -> int:
    if hasattr(os, "nice"):
        os.nice(10)
    os.environ["GRADOPS_FIRST_CALLS"] = "compile"  # this process compiles; it never hands work on
    requests: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_read_requests, args=(sys.stdin.buffer, requests), daemon=True).start()
    from gradops._fast.first_calls import make_kernel

    while True:
        number, recipe, signature = requests.get()
        try:
            made = make_kernel(recipe)
            if signature is not None:  # None: making it compiled it (first_calls.request)
                made.compile(signature)
            answer = f"{number} ok"
        except Exception as error:  # noqa: BLE001 - reported to the parent, which compiles it itself
            answer = f"{number} failed {type(error).__name__}: {error}".replace("\n", " ")[:500]
        print(answer, flush=True)


if __name__ == "__main__":
    sys.exit(main())
