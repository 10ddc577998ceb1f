"""Versions record who wrote them from the request's credentials (``recorded_by``) and keep
what a restored backup claimed apart (``claimed_source``, ``claimed_actor``).

Backfill: a version whose write left an audit event (store, update, revert of that version
number) takes its writer from that event, which always came from the credentials. Any
other version (written by sync, or restored from a backup whose author text was taken as
sent) is marked ``legacy``, its old author text kept as the label.
"""

from django.db import migrations, models

BACKFILL_FROM_AUDIT = """
UPDATE memories_memoryversion AS version
SET recorded_by_type = event.actor_type, recorded_by_id = event.actor_id,
    recorded_by = event.actor_label
FROM memories_memory AS memory, memories_auditevent AS event
WHERE memory.id = version.memory_id
  AND event.mind_id = memory.mind_id
  AND event.memory_id = version.memory_id
  AND event.action IN ('store', 'update', 'revert')
  AND event.details ->> 'version' = version.version::text
"""


class Migration(migrations.Migration):

    dependencies = [
        ("memories", "0005_recall_order"),
    ]

    operations = [
        migrations.RenameField(model_name="memoryversion", old_name="actor",
                               new_name="recorded_by"),
        migrations.AddField(
            model_name="memoryversion", name="recorded_by_type",
            field=models.CharField(default="legacy", max_length=10), preserve_default=False),
        migrations.AddField(
            model_name="memoryversion", name="recorded_by_id",
            field=models.CharField(blank=True, default="", max_length=64),
            preserve_default=False),
        migrations.AddField(
            model_name="memoryversion", name="claimed_source",
            field=models.CharField(blank=True, default="", max_length=10),
            preserve_default=False),
        migrations.AddField(
            model_name="memoryversion", name="claimed_actor",
            field=models.CharField(blank=True, default="", max_length=200),
            preserve_default=False),
        migrations.RunSQL(BACKFILL_FROM_AUDIT, reverse_sql=migrations.RunSQL.noop),
    ]
