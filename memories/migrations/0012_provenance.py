"""Provenance of versions and audit events, and the parent of each version.

Adds ``agent``, ``agent_instance`` and ``device`` (what the writing request claimed in its
X-Synapse-* headers) to versions and audit events, blank on existing rows; and ``parent``
and ``reverted_from`` to versions. Every version written before was derived from the one
before it (versions are numbered as written, each from the current one), so existing
versions get ``parent = version - 1`` (null for version 1); which version a past revert
copied was not recorded, so ``reverted_from`` stays null on them. Columns with a constant
default are added without rewriting the tables; the one UPDATE touches each version once.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memories", "0011_search_language"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="agent",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="agent_instance",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="device",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="memoryversion",
            name="agent",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="memoryversion",
            name="agent_instance",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="memoryversion",
            name="device",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="memoryversion",
            name="parent",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memoryversion",
            name="reverted_from",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunSQL(
            "UPDATE memories_memoryversion SET parent = version - 1 WHERE version > 1",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
