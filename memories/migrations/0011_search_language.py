"""A text-search language per mind: each memory's search document is stemmed in its mind's
language, with accents folded.

Creates the ``unaccent`` extension and one configuration ``synapse_<language>`` per
language of minds.models.SEARCH_LANGUAGES (a copy of PostgreSQL's, with ``unaccent`` before
its stemmer), adds ``search_config`` to memories (set from the mind by a trigger on
insert), and rebuilds ``search_vector`` and its GIN index on the new document function:
every memory row is rewritten once. Contexts are rebuilt by the worker.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

import memories.models

# minds.models.SEARCH_LANGUAGES when this migration was written.
CONFIGURATIONS = """
CREATE EXTENSION IF NOT EXISTS unaccent;
DO $$
DECLARE language text;
BEGIN
  FOREACH language IN ARRAY ARRAY[
      'arabic', 'armenian', 'basque', 'catalan', 'danish', 'dutch', 'english', 'finnish',
      'french', 'german', 'greek', 'hindi', 'hungarian', 'indonesian', 'irish', 'italian',
      'lithuanian', 'nepali', 'norwegian', 'portuguese', 'romanian', 'russian', 'serbian',
      'simple', 'spanish', 'swedish', 'tamil', 'turkish', 'yiddish'] LOOP
    IF NOT EXISTS (
        SELECT 1 FROM pg_ts_config
        WHERE cfgname = 'synapse_' || language AND cfgnamespace = current_schema()::regnamespace)
    THEN
      EXECUTE format('CREATE TEXT SEARCH CONFIGURATION %I (COPY = pg_catalog.%I)',
                     'synapse_' || language, language);
      EXECUTE format('ALTER TEXT SEARCH CONFIGURATION %I ALTER MAPPING FOR word, hword, '
                     'hword_part WITH unaccent, %I', 'synapse_' || language,
                     CASE WHEN language = 'simple' THEN 'simple' ELSE language || '_stem' END);
    END IF;
  END LOOP;
END $$;
"""

DROP_CONFIGURATIONS = """
DO $$
DECLARE name text;
BEGIN
  FOR name IN SELECT cfgname FROM pg_ts_config
              WHERE cfgname LIKE 'synapse\\_%' AND cfgnamespace = current_schema()::regnamespace
  LOOP
    EXECUTE format('DROP TEXT SEARCH CONFIGURATION %I', name);
  END LOOP;
END $$;
"""

INSERT_TRIGGER = """
CREATE FUNCTION synapse_memory_search_config() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.search_config := 'synapse_' || (SELECT search_language FROM minds_mind
                                      WHERE id = NEW.mind_id);
  RETURN NEW;
END $$;
CREATE TRIGGER memory_search_config BEFORE INSERT ON memories_memory
  FOR EACH ROW EXECUTE FUNCTION synapse_memory_search_config();
"""

DROP_INSERT_TRIGGER = """
DROP TRIGGER memory_search_config ON memories_memory;
DROP FUNCTION synapse_memory_search_config();
"""

# A function, because a generated column needs an IMMUTABLE expression (array_to_string
# and the cast to regconfig are only STABLE; the configurations never change once made).
# The configurations are named with their schema: pg_restore computes this column with an
# empty search_path, where an unqualified 'synapse_english' does not resolve. And no name is
# a literal: a literal regconfig is looked up when the table is created, and pg_restore
# creates memories_memory before the configurations (a function takes its row type).
DOCUMENT = """
DO $do$
BEGIN
  EXECUTE format($function$
CREATE FUNCTION synapse_search_document(config text, category text, key text, tags text[],
                                        content text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT setweight(to_tsvector((%1$L || config)::regconfig,
                               replace(coalesce(key, ''), '_', ' ')), 'A')
      || setweight(to_tsvector((%1$L || config)::regconfig,
                               coalesce(array_to_string(tags, ' '), '')), 'A')
      || CASE WHEN category = 'credentials' THEN ''::tsvector
              ELSE setweight(to_tsvector((%1$L || config)::regconfig, coalesce(content, '')),
                             'B')
                || setweight(to_tsvector((%1$L || 'synapse_simple')::regconfig,
                                         coalesce(content, '')), 'D')
         END
$$
$function$, quote_ident(current_schema()) || '.');
END $do$;
"""

OLD_DOCUMENT = """
CREATE FUNCTION synapse_search_document(category text, key text, tags text[], content text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT setweight(to_tsvector('english'::regconfig, replace(coalesce(key, ''), '_', ' ')), 'A')
      || setweight(to_tsvector('english'::regconfig,
                               coalesce(array_to_string(tags, ' '), '')), 'A')
      || CASE WHEN category = 'credentials' THEN ''::tsvector
              ELSE setweight(to_tsvector('english'::regconfig, coalesce(content, '')), 'B')
                || setweight(to_tsvector('simple'::regconfig, coalesce(content, '')), 'D')
         END
$$;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("memories", "0010_episode_context"),
        ("minds", "0002_search_language"),
    ]

    operations = [
        migrations.RunSQL(CONFIGURATIONS, DROP_CONFIGURATIONS),
        migrations.AddField(
            model_name="memory",
            name="search_config",
            field=models.CharField(default="synapse_english", editable=False, max_length=40),
        ),
        migrations.RunSQL(INSERT_TRIGGER, DROP_INSERT_TRIGGER),
        migrations.RunSQL(
            DOCUMENT,
            "DROP FUNCTION synapse_search_document(text, text, text, text[], text);"),
        migrations.RemoveIndex(model_name="memory", name="memory_search_vector"),
        migrations.RemoveField(model_name="memory", name="search_vector"),
        migrations.RunSQL(
            "DROP FUNCTION synapse_search_document(text, text, text[], text);", OLD_DOCUMENT),
        migrations.AddField(
            model_name="memory",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=memories.models.SearchDocument(
                    models.F("search_config"), models.F("category"), models.F("key"),
                    models.F("tags"), models.F("content")),
                output_field=django.contrib.postgres.search.SearchVectorField()),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["search_vector"], name="memory_search_vector"),
        ),
        # Contexts are stemmed in the episode's language too: rebuilt by the worker.
        migrations.RunSQL(
            "INSERT INTO memories_contextqueue (memory_id) SELECT id FROM memories_memory "
            "WHERE memory_type = 'episodic' ORDER BY seq;", migrations.RunSQL.noop),
    ]
