"""Episode context: each episode's second search document (memories.context).

``context_vector`` and ``context_ids`` on memories, the ``ContextQueue`` the worker empties,
and the triggers that fill it. A write that changes an episode's words or its place on a
timeline — content, type, path, moment, trash, supersession, purge; through the services,
sync, import or raw SQL — queues the episode and the CONTEXT_WINDOW episodes on each side
of it, before and after the change (so the episodes it left and the ones it joined are
both rebuilt). Appending to the queue takes no lock another writer could wait on. Every
episode already stored is queued once here, so the worker builds every context.
"""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.functions.datetime
from django.db import migrations, models

# LIMIT 2 below is memories.context.CONTEXT_WINDOW: the episodes on each side of one that
# form its context.
QUEUE_FUNCTION = """
CREATE OR REPLACE FUNCTION synapse_queue_context(m memories_memory) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO memories_contextqueue (memory_id)
  SELECT m.id
  UNION ALL
  (SELECT id FROM memories_memory
   WHERE mind_id = m.mind_id AND path = m.path AND memory_type = 'episodic'
     AND deleted_at IS NULL AND superseded_at IS NULL
     AND (occurred_at, seq) < (m.occurred_at, m.seq)
   ORDER BY occurred_at DESC, seq DESC LIMIT 2)
  UNION ALL
  (SELECT id FROM memories_memory
   WHERE mind_id = m.mind_id AND path = m.path AND memory_type = 'episodic'
     AND deleted_at IS NULL AND superseded_at IS NULL
     AND (occurred_at, seq) > (m.occurred_at, m.seq)
   ORDER BY occurred_at, seq LIMIT 2)
$$;

CREATE OR REPLACE FUNCTION synapse_episode_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.memory_type = 'episodic' THEN
    PERFORM synapse_queue_context(OLD);
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.memory_type = 'episodic' THEN
    PERFORM synapse_queue_context(NEW);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER memory_episode_inserted AFTER INSERT ON memories_memory
  FOR EACH ROW WHEN (NEW.memory_type = 'episodic')
  EXECUTE FUNCTION synapse_episode_changed();
CREATE TRIGGER memory_episode_deleted AFTER DELETE ON memories_memory
  FOR EACH ROW WHEN (OLD.memory_type = 'episodic')
  EXECUTE FUNCTION synapse_episode_changed();
CREATE TRIGGER memory_episode_updated AFTER UPDATE ON memories_memory
  FOR EACH ROW WHEN ((OLD.memory_type = 'episodic' OR NEW.memory_type = 'episodic')
    AND (OLD.content, OLD.category, OLD.memory_type, OLD.path, OLD.occurred_at,
         OLD.deleted_at, OLD.superseded_at, OLD.mind_id)
        IS DISTINCT FROM
        (NEW.content, NEW.category, NEW.memory_type, NEW.path, NEW.occurred_at,
         NEW.deleted_at, NEW.superseded_at, NEW.mind_id))
  EXECUTE FUNCTION synapse_episode_changed();

INSERT INTO memories_contextqueue (memory_id)
  SELECT id FROM memories_memory WHERE memory_type = 'episodic' ORDER BY seq;
-- An episode's date is now part of what the model reads (memories.embeddings).
UPDATE memories_memory SET embedding_pending = true
  WHERE memory_type = 'episodic' AND category <> 'credentials';
"""

DROP = """
DROP TRIGGER IF EXISTS memory_episode_inserted ON memories_memory;
DROP TRIGGER IF EXISTS memory_episode_deleted ON memories_memory;
DROP TRIGGER IF EXISTS memory_episode_updated ON memories_memory;
DROP FUNCTION IF EXISTS synapse_episode_changed();
DROP FUNCTION IF EXISTS synapse_queue_context(memories_memory);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0009_tombstone_path'),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='context_ids',
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=40), blank=True, default=list,
                editable=False, size=None),
        ),
        migrations.AddField(
            model_name='memory',
            name='context_vector',
            field=django.contrib.postgres.search.SearchVectorField(blank=True, editable=False,
                                                                   null=True),
        ),
        migrations.CreateModel(
            name='ContextQueue',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('memory_id', models.CharField(max_length=40)),
                ('queued_at', models.DateTimeField(
                    db_default=django.db.models.functions.datetime.Now())),
            ],
        ),
        migrations.AddIndex(
            model_name='memory',
            index=django.contrib.postgres.indexes.GinIndex(fields=['context_vector'],
                                                           name='memory_context_vector'),
        ),
        migrations.RunSQL(sql=QUEUE_FUNCTION, reverse_sql=DROP),
    ]
