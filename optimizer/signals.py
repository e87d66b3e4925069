"""Who may see a run changes when its `shared_with` changes, and that happens in
the admin (or the ORM), not through a service of ours: m2m_changed is the one
place that sees every such edit. It only notifies the run's open sockets."""

from __future__ import annotations

from django.db.models.signals import m2m_changed
from django.dispatch import receiver

from optimizer.models import Run
from optimizer.runs.events import publish_run_access_changed


@receiver(m2m_changed, sender=Run.shared_with.through, dispatch_uid="run-sharing-changed")
def run_sharing_changed(sender, instance, action, reverse, pk_set, **kwargs):
    if action not in {"post_remove", "post_clear", "post_add"}:
        return
    if reverse:
        # user.runs_shared_with_me.remove(run): the runs are in pk_set (None after
        # a reverse clear, which the sockets' periodic re-check covers).
        run_ids = list(pk_set or [])
    else:
        run_ids = [instance.pk]
    for run_id in run_ids:
        publish_run_access_changed(run_id)
