"""Who may see a run changes when its `shared_with` or `steered_by` changes, and that happens in
the admin (or the ORM), not through a service of ours: m2m_changed is the one
place that sees every such edit. It only notifies the open sockets: the run's,
and the runs lists of the users who lost it."""

from __future__ import annotations

from django.db.models.signals import m2m_changed
from django.dispatch import receiver

from optimizer.models import Run
from optimizer.runs.events import publish_run_access_changed


@receiver(m2m_changed, sender=Run.shared_with.through, dispatch_uid="run-sharing-changed")
@receiver(m2m_changed, sender=Run.steered_by.through, dispatch_uid="run-steering-changed")
def run_sharing_changed(sender, instance, action, reverse, pk_set, **kwargs):
    if action == "pre_clear" and not reverse:
        field = "shared_with" if sender is Run.shared_with.through else "steered_by"
        instance._shared_before_clear = list(getattr(instance, field).values_list("pk", flat=True))
        return
    if action not in {"post_remove", "post_clear", "post_add"}:
        return
    if reverse:
        # user.runs_shared_with_me.remove(run): the runs are in pk_set (None after
        # a reverse clear, which the sockets' periodic re-check covers).
        for run_id in pk_set or []:
            publish_run_access_changed(
                run_id, lost_by=[] if action == "post_add" else [instance.pk]
            )
        return
    if action == "post_add":
        lost_by = []
    elif action == "post_remove":
        lost_by = list(pk_set or [])
    else:
        lost_by = getattr(instance, "_shared_before_clear", [])
    publish_run_access_changed(instance.pk, lost_by=lost_by)
