"""Tombstones keep the path of the purged memory; a change of place moves the diff cursor.

A diff filtered by path (memories.sync.diff) sends the tombstones of memories purged under
that path. Tombstones purged before this migration get the root: every memory lived there
until 0008. The change-stamping trigger of 0003 also stamps a write that changes only a
memory's type, path or moment (the services always bump the version with it; raw SQL may
not), so every write a peer sees still reaches the next diff.
"""

from django.db import migrations, models

STAMP_FUNCTION = """
CREATE OR REPLACE FUNCTION synapse_stamp_memory_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.change_txid := pg_current_xact_id()::text::bigint;
    NEW.created_txid := NEW.change_txid;
  ELSIF (NEW.mind_id, NEW.version, NEW.updated_at, NEW.deleted_at, NEW.superseded_at,
         NEW.verified, NEW.category, NEW.key, NEW.expires_at{place_new})
        IS DISTINCT FROM
        (OLD.mind_id, OLD.version, OLD.updated_at, OLD.deleted_at, OLD.superseded_at,
         OLD.verified, OLD.category, OLD.key, OLD.expires_at{place_old}) THEN
    NEW.change_txid := pg_current_xact_id()::text::bigint;
    NEW.created_txid := OLD.created_txid;
  ELSE
    NEW.change_txid := OLD.change_txid;
    NEW.created_txid := OLD.created_txid;
  END IF;
  RETURN NEW;
END $$;
"""

PLACE = ", {row}.memory_type, {row}.path, {row}.occurred_at"


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0008_types_paths_episodes'),
    ]

    operations = [
        migrations.AddField(
            model_name='memorytombstone',
            name='path',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.RunSQL(
            sql=STAMP_FUNCTION.format(place_new=PLACE.format(row="NEW"),
                                      place_old=PLACE.format(row="OLD")),
            reverse_sql=STAMP_FUNCTION.format(place_new="", place_old="")),
    ]
