"""What the model reads changed (issue 37: a key only when it reads as words,
memories.embeddings.embedding_text): every embedded memory is queued for the embedding
worker again. Its current vector keeps serving search until the worker's replaces it
(search reads any vector of the configured model, pending or not). Credentials are never
embedded. Reversing leaves the queue as it is."""

from django.db import migrations

QUEUE = """
    UPDATE memories_memory SET embedding_pending = TRUE
    WHERE embedding IS NOT NULL AND NOT embedding_pending AND category <> 'credentials'
"""


class Migration(migrations.Migration):

    dependencies = [("memories", "0016_vectors_inline")]

    operations = [migrations.RunSQL(QUEUE, migrations.RunSQL.noop)]
