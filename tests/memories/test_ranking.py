"""memories.ranking: fusion, the neighbour share and the rerank features, on hand-made
candidates (the database side is tests/memories/test_context.py and test_semantic_search.py)."""

from datetime import UTC, datetime

import pytest

from memories.ranking import Candidates, Question, Tuning, fused_parts, rank, rerank_features


def test_fusion_scores_keyword_only_candidates_by_their_similarity():
    candidates = Candidates(keyword=[("a", 2.0), ("b", 1.0)], semantic=[("c", 0.8), ("d", 0.2)],
                            cosine={"a": 0.8, "c": 0.8, "d": 0.2})
    # "b" has no vector: 0 on the semantic side; the others are normalised over the union.
    parts = fused_parts(candidates, keyword_weight=0.5)
    assert parts["b"] == {"keyword": 0.25, "semantic": 0.0}
    assert parts["a"] == {"keyword": 0.5, "semantic": pytest.approx(0.5)}
    assert parts["d"]["semantic"] == pytest.approx(0.0)
    candidates.cosine["b"] = 0.5
    assert fused_parts(candidates, 0.5)["b"]["semantic"] == pytest.approx(0.5 * 0.3 / 0.6)


def test_a_turn_gets_a_share_of_its_better_neighbour_and_only_of_adjacent_ones():
    window = ["t1", "t2", "t3", "t4", "t5"]
    candidates = Candidates(keyword=[("t4", 1.0), ("t5", 0.5)],
                            windows=dict.fromkeys(window, window))
    hits = {hit.id: hit for hit in rank(candidates, Question.of("x"), Tuning(
        keyword_weight=1.0, neighbour_share=0.2, rerank_weight=0.0))}
    assert hits["t5"].parts["neighbour"] == pytest.approx(0.2)  # t4 is next to it
    assert hits["t4"].parts["neighbour"] == pytest.approx(0.2 * 0.5)
    assert set(hits) == {"t4", "t5"}  # neighbours are not added, only lifted


def test_the_question_s_names_pairs_and_dates_are_what_the_rerank_looks_for():
    question = Question.of("What did Caroline paint in May 2023 at the lake house?")
    assert question.names == {"caroline", "2023"}
    assert ("lake", "house") in question.pairs
    assert (question.years, question.months) == ({2023}, {5})
    may = datetime(2023, 5, 8, tzinfo=UTC)
    june = datetime(2023, 6, 8, tzinfo=UTC)
    best = rerank_features(question, "Caroline: I painted the lake house in 2023", may)
    worse = rerank_features(question, "Caroline: I painted the lake house in 2023", june)
    assert best > worse > rerank_features(question, "Melanie: nothing", june)
    assert rerank_features(Question.of("hi"), "anything", None) == 0.0


def test_parts_add_up_to_the_score_and_ties_break_by_id():
    candidates = Candidates(keyword=[("b", 1.0), ("a", 1.0)])
    hits = rank(candidates, Question.of("q"))
    assert [hit.id for hit in hits] == ["a", "b"]
    for hit in hits:
        assert sum(hit.parts.values()) == pytest.approx(hit.score)
        assert set(hit.parts) == {"keyword", "semantic", "neighbour", "rerank"}


def test_long_candidates_get_the_long_memory_keyword_weight():
    """Derived from the candidates' own length, not a setting: a project chat's messages
    (long) weigh the keyword side less than a conversation's turns (short)."""
    from memories.ranking import LONG_WORDS

    short = Candidates(texts={"a": "Caroline: I went there", "b": "Melanie: when?"})
    long = Candidates(texts={"a": "word " * (LONG_WORDS + 1), "b": "word " * LONG_WORDS * 2})
    tuning = Tuning(keyword_weight=0.5, long_keyword_weight=0.2)
    assert tuning.keyword_weight_for(short) == 0.5
    assert tuning.keyword_weight_for(long) == 0.2
    assert Tuning(long_keyword_weight=None).keyword_weight_for(long) == Tuning().keyword_weight
    long.keyword, long.semantic = [("a", 1.0)], [("a", 0.9), ("b", 0.1)]
    long.cosine = dict(long.semantic)
    parts = {hit.id: hit.parts for hit in rank(long, Question.of("word"), tuning)}
    assert parts["a"]["keyword"] == pytest.approx(0.2)
    assert parts["a"]["semantic"] == pytest.approx(0.8)
