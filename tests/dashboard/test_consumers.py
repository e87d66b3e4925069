"""The run websocket against the real ASGI application (auth, origin check,
routing, the embedded channel layer): who may connect, replay after a seq, and
exactly-once delivery while events are written during the replay."""

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from dashboard import consumers
from dashboard.asgi import application
from optimizer.models import Run, RunEvent, run_progress
from optimizer.runs.events import publish_run_event, run_group
from tests.dashboard.test_embedded_mode import session_headers

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(user, run, after=None):
    headers = await sync_to_async(session_headers)(user)
    query = "" if after is None else f"?after={after}"
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/{query}", headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def publish(run, note):
    return await database_sync_to_async(publish_run_event)(
        run.pk, "worker.ping", {"host": "test", "note": note}
    )


async def receive_seqs(communicator, n):
    return [(await communicator.receive_json_from(timeout=5))["seq"] for _ in range(n)]


async def test_it_refuses_a_user_the_run_is_not_shared_with_and_accepts_one_it_is(user, other_user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    communicator, connected, _ = await connect(other_user, run)
    assert not connected
    await database_sync_to_async(run.shared_with.add)(other_user)
    communicator, connected, _ = await connect(other_user, run)
    assert connected
    await communicator.disconnect()


async def test_a_new_client_gets_the_whole_log_in_order_then_live_events(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    for i in range(3):
        await publish(run, f"before {i}")
    communicator, connected, _ = await connect(user, run)
    assert connected
    assert await receive_seqs(communicator, 3) == [1, 2, 3]
    await publish(run, "live")
    message = await communicator.receive_json_from(timeout=5)
    assert message == {"seq": 4, "type": "worker.ping", "data": {"host": "test", "note": "live"}}
    await communicator.disconnect()


async def test_a_client_catching_up_on_several_replay_batches_gets_every_event_as_written(
    user, monkeypatch
):
    """The replay reads a batch of events at a time as the database's JSON text:
    every event arrives once, in order, with its data as it was written."""
    monkeypatch.setattr(consumers, "REPLAY_BATCH", 5)
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    notes = [f'n{i} "é" \\ \n ✓' for i in range(12)]
    for note in notes:
        await publish(run, note)
    communicator, connected, _ = await connect(user, run, after=0)
    assert connected
    received = [await communicator.receive_json_from(timeout=5) for _ in notes]
    assert received == [
        {"seq": i + 1, "type": "worker.ping", "data": {"host": "test", "note": note}}
        for i, note in enumerate(notes)
    ]
    await communicator.disconnect()


async def test_a_malformed_after_replays_from_the_start_instead_of_failing(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    await publish(run, "one")
    communicator, connected, _ = await connect(user, run, after="abc")
    assert connected
    assert await receive_seqs(communicator, 1) == [1]
    await communicator.disconnect()


async def test_a_group_message_already_replayed_is_not_sent_twice(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    for i in range(2):
        await publish(run, str(i))
    communicator, connected, _ = await connect(user, run)
    assert await receive_seqs(communicator, 2) == [1, 2]
    # The same notification arriving late (e.g. published while the replay read the DB).
    layer = get_channel_layer()
    event = await database_sync_to_async(RunEvent.objects.get)(run=run, seq=2)
    await layer.group_send(run_group(run.pk), {"type": "run.event", "message": event.as_message()})
    assert await communicator.receive_nothing(timeout=0.3)
    await publish(run, "next")
    assert await receive_seqs(communicator, 1) == [3]
    await communicator.disconnect()


async def test_a_notification_lost_on_the_way_is_filled_from_the_database(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    communicator, connected, _ = await connect(user, run)
    assert connected
    # Seq 1 and 2 are written without reaching the group (a lost notification)…
    for seq in (1, 2):
        await database_sync_to_async(RunEvent.objects.create)(
            run=run, seq=seq, type="worker.ping", payload={"note": seq}
        )
    await database_sync_to_async(run_progress(run.pk).update)(last_seq=2)
    # …then seq 3 is published: the consumer notices the gap and sends 1, 2, 3 once each.
    await publish(run, "three")
    assert await receive_seqs(communicator, 3) == [1, 2, 3]
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_events_written_during_a_replay_arrive_exactly_once_and_in_order(user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    for i in range(600):  # more than one replay batch
        await publish(run, str(i))
    communicator, connected, _ = await connect(user, run, after=100)
    for i in range(5):
        await publish(run, f"during {i}")
    seqs = await receive_seqs(communicator, 505)
    assert seqs == list(range(101, 606))
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


# The runs list socket: /ws/runs/ pushes list rows of the runs a user may see.


async def connect_list(user):
    headers = (
        await sync_to_async(session_headers)(user)
        if user is not None
        else [(b"origin", b"http://127.0.0.1")]
    )
    communicator = WebsocketCommunicator(application, "/ws/runs/", headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def publish_status(run, status="running"):
    await database_sync_to_async(Run.objects.filter(pk=run.pk).update)(
        status=status, phase="optimizing"
    )
    await database_sync_to_async(publish_run_event)(
        run.pk, "run.status", {"status": status, "phase": "optimizing"}
    )


async def test_the_runs_list_socket_refuses_an_anonymous_visitor():
    communicator, connected, code = await connect_list(None)
    assert not connected
    assert code == 4401


async def test_the_runs_list_socket_pushes_the_owners_run_row_when_its_status_or_budget_changes(
    user,
):
    communicator, connected, _ = await connect_list(user)
    assert connected
    run = await database_sync_to_async(Run.objects.create)(
        owner=user, name="pushed", budget_total=50
    )
    await publish_status(run)
    message = await communicator.receive_json_from(timeout=5)
    assert message["type"] == "run.row"
    assert message["data"]["id"] == run.pk
    assert message["data"]["name"] == "pushed"
    assert message["data"]["status"] == "running" and message["data"]["phase"] == "optimizing"
    assert message["data"]["last_seq"] == 1
    assert "error" not in message["data"]  # the list's compact row, not the run page's summary
    await database_sync_to_async(run_progress(run.pk).update)(budget_used=20)
    await database_sync_to_async(publish_run_event)(run.pk, "run.budget", {"used": 20, "total": 50})
    message = await communicator.receive_json_from(timeout=5)
    assert (
        message["data"]["budget_used"],
        message["data"]["budget_pct"],
        message["data"]["last_seq"],
    ) == (20, 40, 2)
    # Events that do not change a row (trials, pings) push nothing to the list.
    await publish(run, "diagnostics")
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_the_runs_list_socket_never_sends_another_users_run_until_it_is_shared(
    user, other_user, monkeypatch
):
    monkeypatch.setattr("dashboard.consumers.HIDDEN_RECHECK_SECONDS", 0)
    outsider, connected, _ = await connect_list(other_user)
    assert connected
    owner, _, _ = await connect_list(user)
    run = await database_sync_to_async(Run.objects.create)(owner=user, name="private")
    for status in ("running", "stopping", "stopped"):
        await publish_status(run, status)
    assert [(await owner.receive_json_from(timeout=5))["data"]["status"] for _ in range(3)] == [
        "running",
        "stopping",
        "stopped",
    ]
    assert await outsider.receive_nothing(timeout=0.3)
    # Shared while the list is open: its next change reaches the collaborator too.
    await database_sync_to_async(run.shared_with.add)(other_user)
    await publish_status(run, "queued")
    message = await outsider.receive_json_from(timeout=5)
    assert (message["data"]["id"], message["data"]["status"]) == (run.pk, "queued")
    await outsider.disconnect()
    await owner.disconnect()


async def test_the_runs_list_socket_asks_the_database_about_a_hidden_run_at_most_every_few_seconds(
    user, other_user
):
    outsider, connected, _ = await connect_list(other_user)
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    await publish_status(run)
    assert await outsider.receive_nothing(timeout=0.3)
    # Visible now by a change no signal reports (a raw insert), and the outsider's
    # "not visible" answer is still fresh: a busy run of another user costs one
    # visibility query per few seconds, not one per event.
    through = Run.shared_with.through
    await database_sync_to_async(through.objects.create)(run=run, user=other_user)
    await publish_status(run)
    assert await outsider.receive_nothing(timeout=0.3)
    # Shared through the relation (the admin, the ORM): the list asks again at once.
    await database_sync_to_async(through.objects.filter(run=run).delete)()
    await database_sync_to_async(run.shared_with.add)(other_user)
    await publish_status(run)
    assert (await outsider.receive_json_from(timeout=5))["data"]["id"] == run.pk
    await outsider.disconnect()


async def test_an_admins_runs_list_socket_receives_every_users_runs(user, admin_user):
    communicator, connected, _ = await connect_list(admin_user)
    assert connected
    run = await database_sync_to_async(Run.objects.create)(owner=user, name="someone else's")
    await publish_status(run)
    message = await communicator.receive_json_from(timeout=5)
    assert message["data"]["id"] == run.pk and message["data"]["owner"] == "alice"
    await communicator.disconnect()


async def test_the_runs_list_socket_refuses_a_foreign_origin(user):
    headers = [h for h in await sync_to_async(session_headers)(user) if h[0] != b"origin"]
    communicator = WebsocketCommunicator(
        application, "/ws/runs/", headers=[*headers, (b"origin", b"http://evil.example")]
    )
    connected, _ = await communicator.connect()
    assert not connected


async def test_unsharing_a_run_closes_the_other_users_open_socket_as_denied(user, other_user):
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    await database_sync_to_async(run.shared_with.add)(other_user)
    watcher, connected, _ = await connect(other_user, run)
    assert connected
    await publish(run, "while shared")
    assert await receive_seqs(watcher, 1) == [1]

    await database_sync_to_async(run.shared_with.remove)(other_user)
    closed = await watcher.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4403}  # the page shows "access denied"
    await publish(run, "after unsharing")
    assert await watcher.receive_nothing(timeout=0.3)


async def test_a_run_socket_checks_access_again_at_an_event_after_a_while(
    user, other_user, monkeypatch
):
    # Access lost without a sharing edit (here: the run handed to another owner):
    # the periodic re-check ends the stream instead of the signal.
    monkeypatch.setattr("dashboard.consumers.ACCESS_RECHECK_SECONDS", 0)
    run = await database_sync_to_async(Run.objects.create)(owner=other_user)
    watcher, connected, _ = await connect(other_user, run)
    assert connected
    await database_sync_to_async(Run.objects.filter(pk=run.pk).update)(owner=user)
    await publish(run, "not for the old owner")
    assert await watcher.receive_output(timeout=5) == {"type": "websocket.close", "code": 4403}


async def test_a_run_event_reaches_the_viewer_without_a_hop_to_the_shared_sync_thread(
    user, monkeypatch
):
    # channels' dispatch hops to the one thread sync Django code shares before
    # every handler: with 200 viewers, 200 hops in a row per event batch.
    import channels.consumer

    hops = []
    original = channels.consumer.aclose_old_connections

    async def counted():
        hops.append(1)
        await original()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    run = await database_sync_to_async(Run.objects.create)(owner=user)
    communicator, connected, _ = await connect(user, run)
    runs_list, listed, _ = await connect_list(user)
    assert connected and listed
    hops.clear()
    await publish_status(run)
    assert await receive_seqs(communicator, 1) == [1]
    assert (await runs_list.receive_json_from(timeout=5))["data"]["id"] == run.pk
    await get_channel_layer().group_send(run_group(run.pk), {"type": "run.access"})
    assert await communicator.receive_nothing(timeout=0.3)
    assert hops == []
    await communicator.disconnect()
    await runs_list.disconnect()
