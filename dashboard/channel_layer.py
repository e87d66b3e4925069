"""An in-process channel layer that is safe to use from worker threads.

Measured (docs/architecture.md "Two ways to run"): channels' InMemoryChannelLayer keeps an
asyncio.Queue per channel; a `group_send` made from a worker thread through
`async_to_sync` runs on a *different* event loop, so the put never wakes the
consumer awaiting in the server's loop, and messages sit until an unrelated
wake-up (seconds later). Here each waiting receiver is a future of its own
loop, and a sender on any thread resolves it with `loop.call_soon_threadsafe`,
so delivery is immediate wherever the message comes from.

Only for the embedded mode (one process); distributed mode uses channels-redis.
"""

from __future__ import annotations

import asyncio
import random
import string
import threading
import time
from collections import deque
from copy import deepcopy

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer


class ThreadSafeInMemoryChannelLayer(BaseChannelLayer):
    extensions = ["groups", "flush"]

    def __init__(
        self, expiry=60, group_expiry=86400, capacity=100, channel_capacity=None, **kwargs
    ):
        super().__init__(
            expiry=expiry, capacity=capacity, channel_capacity=channel_capacity, **kwargs
        )
        self.group_expiry = group_expiry
        self._lock = threading.Lock()
        self._queues: dict[str, deque[tuple[float, dict]]] = {}
        self._waiters: dict[str, deque[asyncio.Future]] = {}
        self._groups: dict[str, dict[str, float]] = {}

    # --- delivery -------------------------------------------------------------

    def _deliver(self, channel: str, message: dict, *, raise_when_full: bool) -> None:
        """Hand `message` to a waiting receiver (on its own loop) or queue it."""
        with self._lock:
            waiters = self._waiters.get(channel)
            while waiters:
                future = waiters.popleft()
                if not waiters:
                    del self._waiters[channel]
                try:
                    future.get_loop().call_soon_threadsafe(self._resolve, future, channel, message)
                    return
                except RuntimeError:  # that receiver's loop is closed: try the next one
                    waiters = self._waiters.get(channel)
            queue = self._queues.setdefault(channel, deque())
            if len(queue) >= self.get_capacity(channel):
                if raise_when_full:
                    raise ChannelFull(channel)
                return
            queue.append((time.time() + self.expiry, message))

    def _resolve(self, future: asyncio.Future, channel: str, message: dict) -> None:
        # Runs on the receiver's loop. If the receiver was cancelled between the
        # hand-off and now, the message goes to the next receiver or the queue.
        if future.done():
            self._deliver(channel, message, raise_when_full=False)
        else:
            future.set_result(message)

    # --- channel layer API ------------------------------------------------------

    async def send(self, channel, message):
        _check_message(message)
        self.require_valid_channel_name(channel)
        if "__asgi_channel__" in message:
            raise ValueError("message carries the reserved key __asgi_channel__")
        self._deliver(channel, deepcopy(message), raise_when_full=True)

    async def receive(self, channel):
        self.require_valid_channel_name(channel)
        loop = asyncio.get_running_loop()
        with self._lock:
            self._clean_expired()
            queue = self._queues.get(channel)
            if queue:
                _, message = queue.popleft()
                if not queue:
                    del self._queues[channel]
                return message
            future = loop.create_future()
            self._waiters.setdefault(channel, deque()).append(future)
        try:
            return await future
        finally:
            with self._lock:
                waiters = self._waiters.get(channel)
                if waiters and future in waiters:
                    waiters.remove(future)
                    if not waiters:
                        del self._waiters[channel]

    async def new_channel(self, prefix="specific."):
        suffix = "".join(random.choice(string.ascii_letters) for _ in range(12))
        return f"{prefix}.inmemory!{suffix}"

    async def flush(self):
        with self._lock:
            self._queues.clear()
            self._groups.clear()

    async def close(self):
        pass

    def _clean_expired(self) -> None:
        """Drop expired messages (their channel leaves every group) and stale group members. Lock held."""
        now = time.time()
        for channel, queue in list(self._queues.items()):
            expired = False
            while queue and queue[0][0] < now:
                queue.popleft()
                expired = True
            if expired:
                for members in self._groups.values():
                    members.pop(channel, None)
            if not queue:
                del self._queues[channel]
        oldest = now - self.group_expiry
        for members in self._groups.values():
            for channel, joined in list(members.items()):
                if joined < oldest:
                    del members[channel]

    async def group_add(self, group, channel):
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        with self._lock:
            self._groups.setdefault(group, {})[channel] = time.time()

    async def group_discard(self, group, channel):
        self.require_valid_channel_name(channel)
        self.require_valid_group_name(group)
        with self._lock:
            members = self._groups.get(group)
            if members is not None:
                members.pop(channel, None)
                if not members:
                    del self._groups[group]

    async def group_send(self, group, message):
        _check_message(message)
        self.require_valid_group_name(group)
        with self._lock:
            self._clean_expired()
            channels = list(self._groups.get(group, {}))
        for channel in channels:
            self._deliver(channel, deepcopy(message), raise_when_full=False)


def _check_message(message) -> None:
    if not isinstance(message, dict):
        raise TypeError("message is not a dict")  # what channels' own in-memory layer refuses too
