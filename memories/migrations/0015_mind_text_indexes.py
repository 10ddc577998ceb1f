"""Keyword search's GIN indexes carry the mind (btree_gin): a query reads the posting
lists of its mind and of its words together, not every mind's rows holding the words.

Built CONCURRENTLY, outside a transaction, before the table-wide ones go: on a large
table writes and searches go on while they build (docs/scaling.md, "Searching a mind in a
large table"). btree_gin ships with PostgreSQL (contrib) and is a trusted extension: the
database's owner may create it."""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.operations import (
    AddIndexConcurrently,
    BtreeGinExtension,
    RemoveIndexConcurrently,
)
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0014_recall_counts_index"),
    ]

    operations = [
        BtreeGinExtension(),
        AddIndexConcurrently(
            model_name="memory",
            index=GinIndex(fields=["mind", "search_vector"], name="memory_mind_search_vector"),
        ),
        AddIndexConcurrently(
            model_name="memory",
            index=GinIndex(fields=["mind", "context_vector"], name="memory_mind_context_vector"),
        ),
        RemoveIndexConcurrently(model_name="memory", name="memory_search_vector"),
        RemoveIndexConcurrently(model_name="memory", name="memory_context_vector"),
    ]
