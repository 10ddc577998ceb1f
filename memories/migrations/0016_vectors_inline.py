"""Memory rows keep their embedding in the row (docs/scaling.md, "Searching a mind in a
large table").

pgvector's ``vector`` type is stored EXTERNAL by default, and a memory row of about 2 kB
(384 floats are 1,540 bytes) crosses PostgreSQL's 2 kB TOAST threshold: the vector moved
to the TOAST table, so measuring a mind's vectors read about eight buffers per memory.
``toast_tuple_target = 4080`` keeps rows up to about 4 kB whole, and ``STORAGE MAIN`` keeps
the vector in the row past that too, moving the text and the search documents out first.
Both are catalog changes (no rewrite, a brief SHARE UPDATE EXCLUSIVE lock); rows written
before keep their vector out of line until they are written again, or until
``VACUUM FULL memories_memory`` rewrites the table."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("memories", "0015_mind_text_indexes"),
    ]

    operations = [
        migrations.RunSQL(
            sql=["ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE MAIN",
                 "ALTER TABLE memories_memory SET (toast_tuple_target = 4080)"],
            reverse_sql=["ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE "
                         "EXTERNAL",
                         "ALTER TABLE memories_memory RESET (toast_tuple_target)"],
        ),
    ]
