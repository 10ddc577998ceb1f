"""memories/query.py: the search syntax parsed into terms, and what a malformed query is told."""

import pytest

from memories.query import QuerySyntaxError, Term, parse_query, question_query, words_query


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
    ("-", "The query is empty"),
    ("- -- —", "The query is empty"),
    ('docker -"never closed', "Unbalanced quote"),
    ('docker -""', "Empty phrase"),
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


QUESTION = "Which did she adopt first - the cat or the dog?"


def test_a_spaced_dash_in_a_question_is_punctuation():
    parsed = parse_query(QUESTION)
    assert [term.text for term in parsed.terms] == [
        "Which", "did", "she", "adopt", "first", "the", "cat", "or", "dog?"]
    assert parsed.excluded == ()
    assert not parsed.explicit


@pytest.mark.parametrize("query", [
    "docker - swarm", "docker -- swarm", "docker --- swarm", "docker — swarm",
    "docker – swarm", "docker —— swarm", "docker swarm -", "docker swarm --", "- docker swarm",
    "-- docker swarm", "docker\t-\tswarm", "docker -\nswarm",
])
def test_a_lone_or_spaced_dash_is_ignored(query):
    assert parse_query(query) == parse_query("docker swarm")


@pytest.mark.parametrize(("query", "kept"), [
    # Dashes not attached to a letter, digit or quote are punctuation, skipped; what
    # follows them is read as usual (a word, here).
    ("docker --swarm", "swarm"),
    ("docker -?swarm", "?swarm"),
    ("docker -(swarm)", "(swarm)"),
    ("docker —swarm", "swarm"),  # only the ASCII '-' excludes
    ("docker -–swarm", "swarm"),
])
def test_a_dash_not_attached_to_a_word_does_not_exclude(query, kept):
    parsed = parse_query(query)
    assert parsed.clauses == ((Term("word", "docker"),), (Term("word", kept),))
    assert parsed.excluded == ()


def test_a_dash_attached_to_a_word_or_phrase_still_excludes():
    parsed = parse_query('docker - -swarm -"old cluster" -kube*')
    assert parsed.clauses == ((Term("word", "docker"),),)
    assert parsed.excluded == (Term("word", "swarm"), Term("phrase", "old cluster"),
                               Term("prefix", "kube"))
    assert parsed.explicit


@pytest.mark.parametrize("word", ["well-known", "e-mail", "docker-", "x-ray-vision"])
def test_a_dash_inside_or_after_a_word_is_part_of_the_word(word):
    # One term, as written: PostgreSQL's parser reads well-known as the compound and its
    # parts (plainto_tsquery: 'well-known' & 'well' & 'known').
    parsed = parse_query(f"docker {word}")
    assert parsed.clauses == ((Term("word", "docker"),), (Term("word", word),))
    assert parsed.excluded == () and not parsed.explicit


def test_parentheses_and_and_are_no_syntax():
    # Words as written (PostgreSQL drops the punctuation; "and" is a stop word).
    assert [term.text for term in parse_query("(the cat AND AND dog)").terms] == [
        "(the", "cat", "AND", "dog)"]


def test_a_question_query_is_the_syntax_when_it_parses():
    assert question_query('docker -swarm "old cluster"') == parse_query(
        'docker -swarm "old cluster"')
    assert question_query(QUESTION) == parse_query(QUESTION)


@pytest.mark.parametrize("query", [
    'what did "she say', "OR docker", "docker OR", "docker OR OR swarm", "*", "dock*er*",
    "-docker",
    "docker OR -swarm", '""', " ".join(f"word{n}" for n in range(65)),
])
def test_a_question_query_falls_back_to_the_plain_words(query):
    with pytest.raises(QuerySyntaxError):
        parse_query(query)
    assert question_query(query) == words_query(query)


@pytest.mark.parametrize("query", ["*", "- — --", "", "   ", '"', '*"'])
def test_a_question_query_without_words_is_none(query):
    assert question_query(query) is None
