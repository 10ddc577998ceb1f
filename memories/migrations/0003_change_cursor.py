"""The diff cursor: transaction ids stamped by triggers, and tombstones of purged memories."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

# Every write path (services, bulk updates, raw SQL) gets the stamp, because the database
# sets it. change_txid moves only when something a sync peer sees changes: an embedding
# written back by the worker, or credentials re-encrypted under a new key, is not a change
# (and a stale value sent by Django's save() never moves it backwards).
STAMP_FUNCTIONS = """
CREATE FUNCTION synapse_stamp_memory_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.change_txid := pg_current_xact_id()::text::bigint;
    NEW.created_txid := NEW.change_txid;
  ELSIF (NEW.mind_id, NEW.version, NEW.updated_at, NEW.deleted_at, NEW.superseded_at,
         NEW.verified, NEW.category, NEW.key, NEW.expires_at)
        IS DISTINCT FROM
        (OLD.mind_id, OLD.version, OLD.updated_at, OLD.deleted_at, OLD.superseded_at,
         OLD.verified, OLD.category, OLD.key, OLD.expires_at) THEN
    NEW.change_txid := pg_current_xact_id()::text::bigint;
    NEW.created_txid := OLD.created_txid;
  ELSE
    NEW.change_txid := OLD.change_txid;
    NEW.created_txid := OLD.created_txid;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER memory_stamp_change BEFORE INSERT OR UPDATE ON memories_memory
  FOR EACH ROW EXECUTE FUNCTION synapse_stamp_memory_change();

CREATE FUNCTION synapse_stamp_tombstone_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.change_txid := pg_current_xact_id()::text::bigint;
  RETURN NEW;
END $$;

CREATE TRIGGER tombstone_stamp_change BEFORE INSERT OR UPDATE ON memories_memorytombstone
  FOR EACH ROW EXECUTE FUNCTION synapse_stamp_tombstone_change();

UPDATE memories_memory SET change_txid = pg_current_xact_id()::text::bigint,
                           created_txid = pg_current_xact_id()::text::bigint;
"""

DROP_STAMP_FUNCTIONS = """
DROP TRIGGER tombstone_stamp_change ON memories_memorytombstone;
DROP FUNCTION synapse_stamp_tombstone_change();
DROP TRIGGER memory_stamp_change ON memories_memory;
DROP FUNCTION synapse_stamp_memory_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0002_search_document"),
        ("minds", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="change_txid",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="created_txid",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(fields=["mind", "change_txid"], name="memory_mind_change_txid"),
        ),
        migrations.CreateModel(
            name="MemoryTombstone",
            fields=[
                ("id", models.CharField(editable=False, max_length=40, primary_key=True,
                                        serialize=False)),
                ("category", models.CharField(choices=[
                    ("identity", "Identity"), ("preference", "Preference"), ("fact", "Fact"),
                    ("project", "Project"), ("skill", "Skill"), ("mistake", "Mistake"),
                    ("context", "Context"), ("note", "Note"), ("credentials", "Credentials")],
                    max_length=20)),
                ("key", models.CharField(max_length=200)),
                ("deleted_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                ("purged_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("change_txid", models.BigIntegerField(blank=True, editable=False, null=True)),
                ("mind", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                           related_name="tombstones", to="minds.mind")),
            ],
            options={
                "indexes": [
                    models.Index(fields=["mind", "change_txid"],
                                 name="tombstone_mind_change_txid"),
                    models.Index(fields=["mind", "category", "key"], name="tombstone_mind_key"),
                ],
            },
        ),
        migrations.RunSQL(sql=STAMP_FUNCTIONS, reverse_sql=DROP_STAMP_FUNCTIONS),
    ]
