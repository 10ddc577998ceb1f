"""Full-text search: the query parser (SPEC syntax → tsquery) and ranking."""

import re

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F

from memories.models import Memory
from minds.models import Mind

_WORD = re.compile(r"\w+", re.UNICODE)


def any_word_query(text: str) -> SearchQuery | None:
    """A tsquery matching any word of ``text`` (each word a parameter, never pasted)."""
    words = _WORD.findall(text.lower())[:64]
    if not words:
        return None
    combined = None
    for word in words:
        part = SearchQuery(word, search_type="plain", config="english") | SearchQuery(
            word, search_type="plain", config="simple")
        combined = part if combined is None else combined | part
    return combined


def rank_for_recall(*, mind: Mind, memories, query: str) -> list[Memory]:
    """Recall ordered by relevance to ``query``: matches first (by rank), then the rest in
    recall order."""
    tsquery = any_word_query(query)
    ordered = list(memories.recall_order().defer("search_vector", "embedding"))
    if tsquery is None:
        return ordered
    scores = dict(memories.filter(search_vector=tsquery)
                  .annotate(rank=SearchRank(F("search_vector"), tsquery))
                  .values_list("id", "rank"))
    return sorted(ordered, key=lambda memory: -scores.get(memory.id, 0.0))
