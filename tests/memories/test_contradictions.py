"""Contradictions: the rules on a labelled set (precision/recall), and the API route."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from memories.contradictions import assess, tokens
from memories.embeddings import embed_batch, embed_texts, embedding_text
from memories.models import Memory

PAIRS = json.loads((Path(__file__).parent / "data" / "contradiction_pairs.json")
                   .read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def predictions() -> list[tuple[dict, bool]]:
    """(pair, predicted) for every labelled pair, with similarities from the real model."""
    texts = [embedding_text(Memory(**pair[side], tags=[])) for pair in PAIRS
             for side in ("a", "b")]
    vectors = embed_texts(texts)
    result = []
    for position, pair in enumerate(PAIRS):
        first, second = vectors[2 * position], vectors[2 * position + 1]
        similarity = sum(x * y for x, y in zip(first, second, strict=True))
        conflict = assess(pair["a"]["content"], pair["b"]["content"], similarity)
        result.append((pair, conflict is not None))
    return result


def precision_recall(rows) -> tuple[float, float, dict]:
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for pair, predicted in rows:
        actual = pair["contradicts"]
        counts[("t" if predicted == actual else "f") + ("p" if predicted else "n")] += 1
    precision = counts["tp"] / ((counts["tp"] + counts["fp"]) or 1)
    recall = counts["tp"] / ((counts["tp"] + counts["fn"]) or 1)
    return precision, recall, counts


def test_the_labelled_set_has_at_least_40_pairs_of_both_kinds():
    assert len(PAIRS) >= 40
    assert sum(p["contradicts"] for p in PAIRS) >= 15
    assert sum(not p["contradicts"] for p in PAIRS) >= 15


def test_precision_and_recall_on_the_labelled_set_are_at_least_0_8(predictions, capsys):
    precision, recall, counts = precision_recall(predictions)
    held_out = [row for row in predictions if row[0]["split"] == "holdout"]
    held_precision, held_recall, held_counts = precision_recall(held_out)
    with capsys.disabled():
        print(f"\ncontradictions, all {len(predictions)} pairs: precision {precision:.2f} "
              f"recall {recall:.2f} {counts}")
        print(f"contradictions, {len(held_out)} held-out pairs: precision "
              f"{held_precision:.2f} recall {held_recall:.2f} {held_counts}")
    assert precision >= 0.8 and recall >= 0.8
    assert held_precision >= 0.8 and held_recall >= 0.8


@pytest.mark.parametrize("first, second, kind", [
    ("Bob is allergic to peanuts.", "Bob isn't allergic to peanuts.", "negation"),
    ("Sign-up is enabled.", "Sign-up is disabled.", "opposite"),
    ("The API listens on port 8000.", "The API listens on port 8080.", "numbers"),
    ("Release is on 2025-03-03.", "Release is on 2025-04-01.", "dates"),
    ("We run Python 3.11.", "We run Python 3.12.", "versions"),
    ("Standup is at 9:30.", "Standup is at 10:00.", "times"),
    ("Michael lives in Berlin.", "Michael lives in Munich.", "value"),
])
def test_each_rule_names_its_kind(first, second, kind):
    conflict = assess(first, second, 0.9)
    assert conflict is not None and conflict.kind == kind
    assert conflict.reason


def test_nothing_conflicts_below_the_subject_similarity():
    assert assess("Bob is allergic to peanuts.", "Bob is not allergic to peanuts.", 0.3) is None


def test_contractions_become_negations():
    assert tokens("It isn't, won't and can't.") == ("it", "is", "not", "will", "not", "and",
                                                   "can", "not")


@pytest.mark.django_db
class TestRoute:
    @pytest.fixture
    def mind_with_conflicts(self, remember):
        made = {
            "port": remember(category="fact", key="db_port",
                             content="The production database listens on port 5432."),
            "port2": remember(category="fact", key="database_port",
                              content="Production Postgres listens on port 5433."),
            "allergy": remember(category="identity", key="allergy",
                                content="Bob is allergic to peanuts."),
            "allergy2": remember(category="identity", key="allergies",
                                 content="Bob is not allergic to peanuts."),
            "deploy": remember(category="fact", key="deploy",
                               content="Deploys go through GitHub Actions to Fly.io."),
            "secret": remember(category="credentials", key="db_password",
                               content="The production database password is hunter2."),
            "secret2": remember(category="credentials", key="database_password",
                                content="The production database password is hunter3."),
        }
        return made

    @staticmethod
    def pairs(body) -> list[set]:
        return [{m["key"] for m in row["memories"]} for row in body["results"]]

    def test_finds_both_pairs_with_reason_and_score(self, agent, mind_with_conflicts):
        body = agent.get("/memory/contradictions").json()
        assert sorted(map(sorted, self.pairs(body))) == [["allergies", "allergy"],
                                                         ["database_port", "db_port"]]
        for row in body["results"]:
            assert 0 < row["score"] <= 1 and row["reason"]
        kinds = {row["kind"] for row in body["results"]}
        assert kinds == {"negation", "numbers"}

    def test_stored_embeddings_find_the_same_pairs_through_pgvector(self, agent,
                                                                    mind_with_conflicts):
        embed_batch(limit=100)
        assert not Memory.objects.filter(embedding_pending=True).exclude(
            category="credentials").exists()
        body = agent.get("/memory/contradictions").json()
        assert sorted(map(sorted, self.pairs(body))) == [["allergies", "allergy"],
                                                         ["database_port", "db_port"]]

    def test_within_only_considers_recently_updated_memories(self, agent, mind_with_conflicts):
        old = timezone.now() - timedelta(days=30)
        Memory.objects.filter(key__in=["db_port", "database_port"]).update(updated_at=old)
        body = agent.get("/memory/contradictions?within=7d").json()
        assert self.pairs(body) == [{"allergy", "allergies"}]
        # One recent side is enough.
        Memory.objects.filter(key="db_port").update(updated_at=timezone.now())
        assert len(agent.get("/memory/contradictions?within=604800").json()["results"]) == 2

    def test_superseded_and_deleted_memories_take_no_part(self, agent, mind_with_conflicts):
        agent.delete(f"/memory/{mind_with_conflicts['allergy2'].id}")
        Memory.objects.filter(pk=mind_with_conflicts["port2"].id).update(
            superseded_at=timezone.now())
        assert agent.get("/memory/contradictions").json()["results"] == []

    def test_credentials_never_take_part_or_leak(self, agent, mind_with_conflicts):
        text = agent.get("/memory/contradictions").content.decode()
        assert "hunter" not in text and "db_password" not in text

    def test_memories_of_two_paths_never_contradict(self, agent, mind_with_conflicts):
        """Port 5432 in one project and 5433 in another are two facts, whether the
        embeddings are stored (pgvector) or computed in-process."""
        Memory.objects.filter(key="database_port").update(path="projects/b")
        for stored in (False, True):
            if stored:
                embed_batch(limit=100)
            body = agent.get("/memory/contradictions").json()
            assert self.pairs(body) == [{"allergy", "allergies"}], stored
        Memory.objects.filter(key="db_port").update(path="projects/b")
        body = agent.get("/memory/contradictions").json()
        assert sorted(map(sorted, self.pairs(body))) == [["allergies", "allergy"],
                                                         ["database_port", "db_port"]]

    def test_other_minds_memories_never_pair_with_mine(self, bob_agent, mind_with_conflicts):
        assert bob_agent.get("/memory/contradictions").json() == {"count": 0, "results": []}

    @pytest.mark.parametrize("query", ["within=soon", "limit=0", "limit=201", "since=1d"])
    def test_bad_parameters_are_400_naming_them(self, agent, query):
        response = agent.get(f"/memory/contradictions?{query}")
        assert response.status_code == 400
        assert query.split("=")[0] in response.json()["error"]["fields"]

    def test_a_read_only_key_may_read_them(self, reader, mind_with_conflicts):
        response = reader.get("/memory/contradictions")
        assert response.status_code == 200
        assert sorted(map(sorted, self.pairs(response.json()))) == [
            ["allergies", "allergy"], ["database_port", "db_port"]]


@pytest.mark.django_db
def test_the_number_of_queries_does_not_grow_with_the_mind(agent, remember, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert agent.get("/memory/contradictions").status_code == 200
        return len(captured.captured_queries)

    def add(numbers) -> None:
        for number in numbers:
            remember(key=f"service_{number}",
                     content=f"Service {number} listens on port {number}.")

    agent.get("/memory")  # the key's last_used_at is written once a minute: not in the count
    # ... even when loading the model on a busy machine takes longer than that minute.
    settings.SYNAPSE = {**settings.SYNAPSE, "KEY_LAST_USED_RESOLUTION_SECONDS": 3600}
    add(range(2))
    embed_batch(limit=100)
    add(range(2, 4))
    few_mixed = queries()  # some embedded, some waiting for the worker (embedded in-process)
    embed_batch(limit=100)
    few_embedded = queries()
    add(range(4, 10))
    embed_batch(limit=100)
    add(range(10, 20))
    assert queries() == few_mixed
    embed_batch(limit=100)
    assert queries() == few_embedded  # one pgvector query for every neighbour
