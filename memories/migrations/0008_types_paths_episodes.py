"""Memory types, paths and episodes (docs/api.md, the memory object): every memory kept as it was.

Existing memories get the type a store without one gives (``identity`` for the identity
category, else ``semantic``), the root path and no ``occurred_at``; their versions too. The
type is derived with the change-stamping trigger off: it is a derivation every instance
makes the same way, not a change for peers to pull (memories.sync). ``seq`` numbers
memories in write order (existing rows in table order) for the timeline's tie-break.
"""

from django.conf import settings
from django.db import migrations, models

import memories.models

# One rewrite of the table fills the column for existing rows; the sequence belongs to the
# column (dropped with it, dumped and restored with it).
ADD_WRITE_ORDER = """
CREATE SEQUENCE memory_write_seq;
ALTER TABLE memories_memory ADD COLUMN seq bigint NOT NULL DEFAULT nextval('memory_write_seq');
ALTER SEQUENCE memory_write_seq OWNED BY memories_memory.seq;
"""

# The seq column rewrote the table in this transaction, so the update below queues the
# deferred foreign-key checks of the rows it changes, and PostgreSQL refuses to alter a table
# with pending trigger events ("cannot ALTER TABLE ... pending trigger events"): the checks
# run at once (SET CONSTRAINTS ... IMMEDIATE), then the constraints are deferred again.
DERIVE_TYPES = """
ALTER TABLE memories_memory DISABLE TRIGGER memory_stamp_change;
UPDATE memories_memory SET memory_type = 'identity' WHERE category = 'identity';
SET CONSTRAINTS ALL IMMEDIATE;
SET CONSTRAINTS ALL DEFERRED;
ALTER TABLE memories_memory ENABLE TRIGGER memory_stamp_change;
UPDATE memories_memoryversion SET memory_type = 'identity' WHERE category = 'identity';
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0007_quota_counters'),
        ('minds', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='memory_type',
            field=models.CharField(choices=[('semantic', 'Semantic'), ('episodic', 'Episodic'), ('procedural', 'Procedural'), ('working', 'Working'), ('identity', 'Identity')], default='semantic', max_length=12),
        ),
        migrations.AddField(
            model_name='memory',
            name='occurred_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='memory',
            name='path',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(
                sql=ADD_WRITE_ORDER,
                reverse_sql="ALTER TABLE memories_memory DROP COLUMN seq; "
                            "DROP SEQUENCE IF EXISTS memory_write_seq;")],
            state_operations=[migrations.AddField(
                model_name='memory',
                name='seq',
                field=models.BigIntegerField(db_default=memories.models.WriteOrder(),
                                             editable=False),
            )],
        ),
        migrations.AddField(
            model_name='memoryversion',
            name='memory_type',
            field=models.CharField(choices=[('semantic', 'Semantic'), ('episodic', 'Episodic'), ('procedural', 'Procedural'), ('working', 'Working'), ('identity', 'Identity')], default='semantic', max_length=12),
        ),
        migrations.AddField(
            model_name='memoryversion',
            name='occurred_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='memoryversion',
            name='path',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.RunSQL(sql=DERIVE_TYPES, reverse_sql=migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name='memory',
            index=models.Index(fields=['mind', 'path'], name='memory_mind_path', opclasses=['varchar_pattern_ops', 'varchar_pattern_ops']),
        ),
        migrations.AddIndex(
            model_name='memory',
            index=models.Index(condition=models.Q(('deleted_at__isnull', True), ('memory_type', 'episodic'), ('superseded_at__isnull', True)), fields=['mind', 'path', 'occurred_at', 'seq'], name='memory_timeline'),
        ),
        migrations.AddConstraint(
            model_name='memory',
            constraint=models.CheckConstraint(condition=models.Q(('path__regex', '^([a-z0-9][a-z0-9._-]{0,63}(/[a-z0-9][a-z0-9._-]{0,63}){0,7})?$')), name='memory_path_normal_form'),
        ),
        migrations.AddConstraint(
            model_name='memory',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('memory_type', 'episodic'), ('occurred_at__isnull', False)), models.Q(models.Q(('memory_type', 'episodic'), _negated=True), ('occurred_at__isnull', True)), _connector='OR'), name='memory_occurred_at_episodic'),
        ),
    ]
