"""Per-mind quota counters (memories.quotas), filled from the rows already stored."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0005_recall_order'),
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
        # Existing minds start with exact counters, all in slot 0.
        migrations.RunSQL(
            sql="""
                INSERT INTO memories_quotacounter (mind_id, slot, memories, versions, content_bytes)
                SELECT mind.id, 0,
                       (SELECT count(*) FROM memories_memory m WHERE m.mind_id = mind.id),
                       (SELECT count(*) FROM memories_memoryversion v
                          JOIN memories_memory m ON m.id = v.memory_id WHERE m.mind_id = mind.id),
                       (SELECT coalesce(sum(octet_length(v.content)), 0)
                          FROM memories_memoryversion v
                          JOIN memories_memory m ON m.id = v.memory_id WHERE m.mind_id = mind.id)
                FROM minds_mind mind
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
