"""memories/query.py: the search syntax parsed into terms, and what a malformed query is told."""

import pytest

from memories.query import QuerySyntaxError, Term, parse_query


def test_plain_words_become_one_clause_each():
    parsed = parse_query("docker swarm")
    assert parsed.clauses == ((Term("word", "docker"),), (Term("word", "swarm"),))
    assert not parsed.explicit


def test_phrases_prefixes_or_and_exclusions_are_parsed():
    parsed = parse_query('"exact phrase" deploy* docker OR kubernetes -swarm -"old cluster"')
    assert parsed.clauses == (
        (Term("phrase", "exact phrase"),),
        (Term("prefix", "deploy"),),
        (Term("word", "docker"), Term("word", "kubernetes")),
    )
    assert parsed.excluded == (Term("word", "swarm"), Term("phrase", "old cluster"))
    assert parsed.explicit


def test_lowercase_or_is_an_ordinary_word():
    assert parse_query("tea or coffee").clauses == (
        (Term("word", "tea"),), (Term("word", "or"),), (Term("word", "coffee"),))


@pytest.mark.parametrize(("query", "message"), [
    ('"never closed', "Unbalanced quote"),
    ("docker -", "must be followed directly by a word"),
    ("- docker", "must be followed directly by a word"),
    ("*", "a '*' must follow"),
    ("dock*er*", "a '*' must follow"),
    ("OR docker", "OR at character 1"),
    ("docker OR", "OR at the end"),
    ("docker OR OR swarm", "needs a word or phrase on each side"),
    ("docker OR -swarm", "cannot be part of OR"),
    ("-docker", "excluded terms alone match nothing"),
    ('""', "Empty phrase"),
    ("   ", "The query is empty"),
    ("a\x00b", "NUL"),
    (" ".join(f"word{n}" for n in range(65)), "Too many distinct terms"),
])
def test_malformed_queries_raise_a_message_saying_what_is_wrong(query, message):
    with pytest.raises(QuerySyntaxError, match=message.replace("*", r"\*")):
        parse_query(query)
