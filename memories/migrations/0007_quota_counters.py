"""Per-mind quota counters (memories.quotas), filled from the rows already stored."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0006_memoryversion_recorded_by'),
        ('minds', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='QuotaCounter',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slot', models.PositiveSmallIntegerField()),
                ('memories', models.BigIntegerField(default=0)),
                ('versions', models.BigIntegerField(default=0)),
                ('content_bytes', models.BigIntegerField(default=0)),
                ('mind', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='minds.mind')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('mind', 'slot'), name='quota_counter_slot_unique')],
            },
        ),
        # Existing minds start with exact counters, spread over their 16 slots
        # (memories.quotas.SLOTS) the way memories.quotas.share splits a limit, so that no
        # slot holds more than its share unless the mind is already over its limit.
        migrations.RunSQL(
            sql="""
                INSERT INTO memories_quotacounter (mind_id, slot, memories, versions, content_bytes)
                SELECT totals.mind_id, slot,
                       totals.memories / 16 + CASE WHEN slot < totals.memories % 16 THEN 1 ELSE 0 END,
                       totals.versions / 16 + CASE WHEN slot < totals.versions % 16 THEN 1 ELSE 0 END,
                       totals.content_bytes / 16
                           + CASE WHEN slot < totals.content_bytes % 16 THEN 1 ELSE 0 END
                FROM (
                    SELECT mind.id AS mind_id,
                           (SELECT count(*) FROM memories_memory m
                             WHERE m.mind_id = mind.id) AS memories,
                           (SELECT count(*) FROM memories_memoryversion v
                              JOIN memories_memory m ON m.id = v.memory_id
                             WHERE m.mind_id = mind.id) AS versions,
                           (SELECT coalesce(sum(octet_length(v.content)), 0)::bigint
                              FROM memories_memoryversion v
                              JOIN memories_memory m ON m.id = v.memory_id
                             WHERE m.mind_id = mind.id) AS content_bytes
                    FROM minds_mind mind
                ) AS totals CROSS JOIN generate_series(0, 15) AS slot
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
