"""Invitations sent by someone who is no longer an active owner of their mind are revoked
(issue 36, finding 2). From now on minds.services revokes them, audited, when an owner stops
being one; this closes those left open before that rule, without an audit event (the
departure that should have closed them is in the log already). Acceptance refuses them
either way (minds.invitations.closed_reason); reversing leaves them revoked."""

from django.db import migrations
from django.db.models import Exists, OuterRef
from django.utils import timezone


def close(apps, schema_editor):
    Invitation = apps.get_model("minds", "Invitation")  # noqa: N806 (a model class)
    Membership = apps.get_model("minds", "Membership")  # noqa: N806
    still_owner = Membership.objects.filter(mind=OuterRef("mind"), user=OuterRef("invited_by"),
                                            role="owner", user__is_active=True)
    (Invitation.objects.filter(accepted_at__isnull=True, declined_at__isnull=True,
                               revoked_at__isnull=True)
     .exclude(Exists(still_owner)).update(revoked_at=timezone.now()))


class Migration(migrations.Migration):

    dependencies = [("minds", "0009_queued_reset_mail")]

    operations = [migrations.RunPython(close, migrations.RunPython.noop)]
