"""The index recall's counts and the list's ``count`` read alone (memory_recall_counts).

Built CONCURRENTLY, outside a transaction: on a large table writes go on while it builds
(docs/scaling.md, "Counting a large mind")."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0013_scope_reset"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                condition=models.Q(("deleted_at__isnull", True), ("superseded_at__isnull", True)),
                fields=["mind", "priority_rank"],
                include=("verified", "expires_at"),
                name="memory_recall_counts",
            ),
        ),
    ]
