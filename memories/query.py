"""The search query syntax (docs/search.md): parsed into terms and turned into a tsquery."""

import re
import unicodedata
from dataclasses import dataclass

from django.contrib.postgres.search import SearchQuery

MAX_QUERY_TERMS = 64
# The text-search configuration of a mind that keeps the default language
# (minds.models.search_config("english")); a mind's own comes from Mind.search_config.
DEFAULT_CONFIG = "synapse_english"
_PREFIX_CORE = re.compile(r"[^\W_]+")
_WORD = re.compile(r"[^\W_]+")


class QuerySyntaxError(ValueError):
    """The query does not follow the search syntax; the message says what is wrong."""


@dataclass(frozen=True)
class Term:
    """One searchable piece: a word, a "phrase", or a prefix*."""

    kind: str  # "word", "phrase" or "prefix"
    text: str
    # The text-search configuration its words are stemmed with: the mind's.
    config: str = DEFAULT_CONFIG

    def search_query(self) -> SearchQuery:
        """The same tsquery as a Django expression."""
        if self.kind == "prefix":
            return SearchQuery(f"'{self.text}':*", config=self.config, search_type="raw")
        return SearchQuery(self.text, config=self.config,
                           search_type="phrase" if self.kind == "phrase" else "plain")

    def tsquery_sql(self) -> tuple[str, list]:
        """SQL for this term's tsquery; the user's text only ever travels as a parameter."""
        if self.kind == "phrase":
            return "phraseto_tsquery(%s::regconfig, %s)", [self.config, self.text]
        if self.kind == "prefix":
            # The core is letters and digits only (checked by the parser), so quoting it
            # as a tsquery lexeme cannot be escaped out of.
            return "to_tsquery(%s::regconfig, %s)", [self.config, f"'{self.text}':*"]
        return "plainto_tsquery(%s::regconfig, %s)", [self.config, self.text]


@dataclass(frozen=True)
class ParsedQuery:
    """Clauses are ANDed; the terms inside one clause are ORed; excluded terms must not
    match. ``explicit`` says whether the query used any operator (quotes, OR, -, *)."""

    clauses: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...] = ()
    explicit: bool = False

    @property
    def terms(self) -> list[Term]:
        return [term for clause in self.clauses for term in clause]


def _is_dash(char: str) -> bool:
    """Whether ``char`` is a dash: '-', '–', '—' and the rest of Unicode's dash punctuation."""
    return unicodedata.category(char) == "Pd"


def _attached(text: str, position: int) -> bool:
    """Whether the character at ``position`` (after a '-') starts a word or a phrase: a
    letter, a digit or a '"'. Only then does the '-' exclude."""
    return position < len(text) and (text[position] == '"'
                                     or _WORD.match(text, position) is not None)


def _tokens(text: str):
    """Yield (negated, kind, text, position) for each item of the query."""
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char.isspace():
            position += 1
            continue
        start = position
        negated = char == "-" and _attached(text, position + 1)
        if negated:
            position += 1
            char = text[position]
        elif _is_dash(char):
            # A lone or spaced dash (" - ", "--", "—", a trailing "-") is punctuation: the
            # run of dashes is skipped, and whatever follows it is read as usual.
            while position < length and _is_dash(text[position]):
                position += 1
            continue
        if char == '"':
            end = text.find('"', position + 1)
            if end == -1:
                raise QuerySyntaxError(
                    f"Unbalanced quote: the phrase opened at character {position + 1} is "
                    "never closed.")
            phrase = text[position + 1:end]
            if not phrase.strip():
                raise QuerySyntaxError(f"Empty phrase \"\" at character {position + 1}.")
            yield negated, "phrase", phrase, start
            position = end + 1
            continue
        end = position
        while end < length and not text[end].isspace() and text[end] != '"':
            end += 1
        word = text[position:end]
        position = end
        if word.endswith("*"):
            core = word.rstrip("*")
            runs = _PREFIX_CORE.findall(core)
            if not core or len(runs) != 1 or runs[0] != core:
                raise QuerySyntaxError(
                    f"'{word}' at character {start + 1}: a '*' must follow a word's first "
                    "letters or digits, e.g. deploy*.")
            yield negated, "prefix", core, start
        elif word == "OR" and not negated:
            yield False, "or", word, start
        else:
            yield negated, "word", word, start


def parse_query(text: str, config: str = DEFAULT_CONFIG) -> ParsedQuery:
    """Parse the search syntax (docs/search.md): words ANDed, "phrases", prefix*, a OR b,
    -exclusion (a '-' attached to a word or phrase; a lone or spaced dash is punctuation,
    ignored); its terms are stemmed with the text-search configuration ``config``.

    Raises QuerySyntaxError with a message for the user when the query is malformed.
    """
    if "\x00" in text:
        raise QuerySyntaxError("The query contains a NUL character.")
    clauses: list[list[Term]] = []
    excluded: list[Term] = []
    explicit = False
    pending_or = False
    last_was_positive = False
    for negated, kind, value, position in _tokens(text):
        if kind == "or":
            explicit = True
            if not last_was_positive or pending_or:
                raise QuerySyntaxError(
                    f"OR at character {position + 1} needs a word or phrase on each side, "
                    "e.g. docker OR kubernetes.")
            pending_or = True
            continue
        term = Term(kind, value, config)
        explicit = explicit or negated or kind != "word"
        if negated:
            if pending_or:
                raise QuerySyntaxError(
                    f"An excluded term cannot be part of OR (character {position + 1}).")
            excluded.append(term)
            last_was_positive = False
            continue
        if pending_or:
            clauses[-1].append(term)
            pending_or = False
        else:
            clauses.append([term])
        last_was_positive = True
    if pending_or:
        raise QuerySyntaxError("OR at the end of the query needs a word or phrase after it.")
    if not clauses:
        raise QuerySyntaxError(
            "Give at least one word or phrase to search for; excluded terms alone match "
            "nothing." if excluded else "The query is empty.")
    unique_clauses = tuple(dict.fromkeys(tuple(clause) for clause in clauses))
    unique_excluded = tuple(dict.fromkeys(excluded))
    if len(unique_excluded) + sum(len(clause) for clause in unique_clauses) > MAX_QUERY_TERMS:
        raise QuerySyntaxError(f"Too many distinct terms: at most {MAX_QUERY_TERMS} per query.")
    return ParsedQuery(unique_clauses, unique_excluded, explicit)


def search_query(parsed: ParsedQuery) -> SearchQuery:
    """The strict tsquery of a parsed query: every clause, no excluded term."""
    combined = None
    for clause in parsed.clauses:
        either = clause[0].search_query()
        for term in clause[1:]:
            either = either | term.search_query()
        combined = either if combined is None else combined & either
    for term in parsed.excluded:
        combined = combined & ~term.search_query()
    return combined


def words_query(text: str, config: str = DEFAULT_CONFIG) -> ParsedQuery | None:
    """The plain words of ``text`` as a natural-language query (operators ignored)."""
    words = _WORD.findall(text)[:MAX_QUERY_TERMS]
    if not words:
        return None
    return ParsedQuery(tuple((Term("word", word, config),) for word in words))


def question_query(text: str, config: str = DEFAULT_CONFIG) -> ParsedQuery | None:
    """The query of a question that is never refused (hybrid search): the search syntax
    when ``text`` follows it (``-swarm`` excludes, "phrases" stay phrases), its plain
    words (:func:`words_query`) when it does not; None when it holds no word at all."""
    try:
        return parse_query(text, config)
    except QuerySyntaxError:
        return words_query(text, config)
