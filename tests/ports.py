"""Loopback ports for the services tests and benches start: the one `free_port`.

A port that the kernel hands out with bind(0) comes from the ephemeral range, the same range
every outgoing connection draws from. Between the probe and the service's own bind, seconds
later on a loaded machine, another pytest-xdist worker's probe or any client's connection
could take it, and the service then failed to start. Ports here come from below the ephemeral
range (32768-60999 on Linux), each xdist worker from its own slice, walked in turn from a
random start (another run on the same machine walks elsewhere), each checked by binding it.
"""

from __future__ import annotations

import os
import random
import socket
import threading

LOW, HIGH = 20000, 32767  # below /proc/sys/net/ipv4/ip_local_port_range's 32768


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker) if worker.isdigit() else 0
    width = (HIGH - LOW) // max(count, 1)
    start = LOW + index % max(count, 1) * width
    return range(start, start + width)


_lock = threading.Lock()
_ports = _slice()
_next = random.randrange(len(_ports))


def free_port() -> int:
    """A loopback port nobody holds now and this process has not handed out before (until
    its slice wraps around)."""
    global _next
    with _lock:
        for _ in range(len(_ports)):
            port = _ports[_next % len(_ports)]
            _next += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise RuntimeError(f"no free loopback port in {_ports.start}-{_ports.stop - 1}")
