"""The websockets: a run's events at `/ws/runs/<id>/?after=<seq>`, and the
runs list's rows at `/ws/runs/`.

On connect the consumer joins the run's group *first* and then replays the
events after `after` from the database; group messages with a seq it has
already sent are dropped, and a gap (a seq beyond the next expected one) is
filled from the database. So a client that reconnects with the last seq it saw
receives every later event exactly once, in order.

The runs list has no log to replay: its page reloads /runs/list.json whenever
its socket (re)connects and then applies the rows pushed to the `runs` group.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from urllib.parse import parse_qs

from channels.consumer import AsyncConsumer, get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from optimizer.models import Run
from optimizer.runs.events import RUNS_GROUP, event_texts, run_group

# Events a reconnecting socket reads from the database at a time: a fast run's
# trials events hold several minibatches each (optimizer.runs.recorder.MAX_TRIAL_ITEMS).
REPLAY_BATCH = 200
# A run socket asks "may this user still see the run?" again at the first event
# after this many seconds, besides at once when the run's sharing changes
# (optimizer.signals): an access lost another way (an owner change in the admin,
# a deactivated account) ends the stream within this time of the next event.
ACCESS_RECHECK_SECONDS = 10.0
# Close codes the page shows as "access denied" (static/js/live-socket.js).
CLOSE_LOGGED_OUT = 4401
CLOSE_DENIED = 4403
# A frame that is not a JSON text (RFC 6455: data of a type it cannot accept).
CLOSE_UNSUPPORTED_DATA = 1003
# At most one replay from the database per this many seconds per socket, however
# often a client says "resume": more within the interval are answered by one
# replay at its end.
RESUME_SECONDS = 1.0


class JsonFramesOnly(AsyncJsonWebsocketConsumer):
    """A client frame that is not JSON text (binary, or text that does not parse)
    closes the socket with 1003 instead of raising in the consumer (a 1011)."""

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        if text_data is None:
            await self.close(code=CLOSE_UNSUPPORTED_DATA)
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self.close(code=CLOSE_UNSUPPORTED_DATA)
            return
        await self.receive_json(content, **kwargs)


def _user_can_view_run(user, run_id: int) -> bool:
    return Run.objects.visible_to(user).filter(pk=run_id).exists()


def _user_still_can_view_run(user, run_id: int) -> bool:
    """Re-read the user too: the scope's copy keeps the flags it had at connect."""
    user = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    return user is not None and _user_can_view_run(user, run_id)


class GroupMessagesOnTheLoop(AsyncConsumer):
    """Runs the handlers named in `loop_handlers` straight on the event loop.

    channels' dispatch first hops to the one thread that sync Django code
    shares (`aclose_old_connections`) before every handler, so that a handler
    reaching the database without `database_sync_to_async` finds no stale
    connection. One group message to N viewers of a web process is N such hops
    through that one thread, each a thread hand-off and a wait for the GIL: a
    large share of the web process's CPU per delivered event with many viewers
    (docs/benchmarks.md "bench/fanout.py"). The handlers named here touch the
    database only through `database_sync_to_async`, which closes old
    connections itself. A client's frames (`websocket_receive`) are such a
    handler too when the consumer reads the database only that way: a client
    sending 5,000 frames cost the server ~1 s of CPU in hops, 0.3 s without."""

    loop_handlers: frozenset[str] = frozenset()

    async def dispatch(self, message):
        name = get_handler_name(message)
        if name in self.loop_handlers:
            await getattr(self, name)(message)
        else:
            await super().dispatch(message)


class RunConsumer(JsonFramesOnly, GroupMessagesOnTheLoop, AsyncJsonWebsocketConsumer):
    loop_handlers = frozenset({"run_events", "run_event", "run_access", "websocket_receive"})

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_LOGGED_OUT)
            return
        self.user = user
        self.denied = False
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await database_sync_to_async(_user_can_view_run)(user, self.run_id):
            await self.close(code=CLOSE_DENIED)
            return
        # As if last asked at a random moment of the past interval: viewers who
        # connected together (a page shared with a team, a bench) then re-ask
        # spread over the interval instead of all in one event's delivery (each
        # answer is a query on the one thread database calls share: 200 viewers
        # re-asking at once held one delivery for ~0.5 s).
        self.access_checked_at = time.monotonic() - random.uniform(0, ACCESS_RECHECK_SECONDS)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        self.group = run_group(self.run_id)
        self.resumed_at = -RESUME_SECONDS
        self.resume_pending: asyncio.Task | None = None
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._catch_up()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        pending = getattr(self, "resume_pending", None)
        if pending is not None:
            pending.cancel()

    async def receive_json(self, content, **kwargs):
        # The only thing a client says is "resume": send what I have not had yet
        # (after a gap it noticed). One replay per RESUME_SECONDS at most.
        if not (isinstance(content, dict) and content.get("type") == "resume"):
            return
        wait = self.resumed_at + RESUME_SECONDS - time.monotonic()
        if wait <= 0:
            await self._resume()
        elif self.resume_pending is None:
            self.resume_pending = asyncio.get_running_loop().create_task(self._resume_after(wait))

    async def _resume_after(self, wait: float):
        await asyncio.sleep(wait)
        self.resume_pending = None
        await self._resume()

    async def _resume(self):
        self.resumed_at = time.monotonic()
        if await self._still_allowed():
            await self._catch_up()

    async def run_access(self, message):
        """The run's sharing changed: ask again now."""
        await self._still_allowed(force=True)

    async def _still_allowed(self, force: bool = False) -> bool:
        """False (and the socket closed with 4403) once the user may no longer see the run."""
        if self.denied:
            return False
        now = time.monotonic()
        if not force and now - self.access_checked_at < ACCESS_RECHECK_SECONDS:
            return True
        allowed = await database_sync_to_async(_user_still_can_view_run)(self.user, self.run_id)
        self.access_checked_at = now
        if not allowed:
            self.denied = True
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.close(code=CLOSE_DENIED)
        return allowed

    async def _catch_up(self):
        while True:
            events = await database_sync_to_async(event_texts)(
                self.run_id, self.last_seq, REPLAY_BATCH
            )
            for seq, text in events:
                await self.send(text_data=text)
                self.last_seq = seq
            if len(events) < REPLAY_BATCH:
                return

    async def run_events(self, message):
        """A batch of events committed together: `events` is [[seq, JSON text]],
        encoded once by the publisher (optimizer.runs.events) instead of once per viewer."""
        for seq, text in message["events"]:
            await self._forward(seq, text)

    async def run_event(self, message):
        """One event as a dict (the older message shape)."""
        await self._forward(message["message"]["seq"], json.dumps(message["message"]))

    async def _forward(self, seq: int, text: str):
        if seq <= self.last_seq or not await self._still_allowed():
            return
        if seq > self.last_seq + 1:
            await self._catch_up()  # fills the gap and includes this event
            return
        await self.send(text_data=text)
        self.last_seq = seq


# How long a connection trusts its last answer to "may this user see run N?"
# before asking the DB again. A run shared with the user while the list is open
# appears within seconds; an unshared one stops within a minute; and other
# users' busy runs cost one query per few seconds per connection, not one per event.
VISIBLE_RECHECK_SECONDS = 60.0
HIDDEN_RECHECK_SECONDS = 5.0


class RunListConsumer(JsonFramesOnly, GroupMessagesOnTheLoop, AsyncJsonWebsocketConsumer):
    """Forwards the `runs` group's rows (`{"type": "run.row", "data": row}`) of
    the runs the connected user may see, and nothing of the others. A run's
    sharing change (`runs.access`) makes every list ask again at once; a user
    who lost the run is sent `{"type": "run.hidden", "data": {"id": …}}`."""

    loop_handlers = frozenset({"runs_row", "runs_access"})

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_LOGGED_OUT)
            return
        self.user = user
        self.checked: dict[int, tuple[bool, float]] = {}  # run id → (visible, when asked)
        await self.channel_layer.group_add(RUNS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "user"):
            await self.channel_layer.group_discard(RUNS_GROUP, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """Clients say nothing on this socket."""

    async def runs_row(self, message):
        if await self._may_see(message["run_id"], message["owner_id"]):
            await self.send_json({"type": "run.row", "data": message["row"]})

    async def runs_access(self, message):
        """Who may see the run changed: forget the last answer, and tell a user
        who lost it (and may no longer see it some other way) to drop its row."""
        run_id = message["run_id"]
        self.checked.pop(run_id, None)
        if self.user.pk in message.get("lost_by", ()) and not await self._may_see(
            run_id, owner_id=None
        ):
            await self.send_json({"type": "run.hidden", "data": {"id": run_id}})

    async def _may_see(self, run_id: int, owner_id: int | None) -> bool:
        if self.user.is_superuser or owner_id == self.user.pk:
            return True
        now = time.monotonic()
        visible, when = self.checked.get(run_id, (False, None))
        if when is not None and now - when < (
            VISIBLE_RECHECK_SECONDS if visible else HIDDEN_RECHECK_SECONDS
        ):
            return visible
        visible = await database_sync_to_async(_user_can_view_run)(self.user, run_id)
        self.checked[run_id] = (visible, now)
        return visible
