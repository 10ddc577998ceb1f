"""Memory paths (memories.paths): one normal form, refusals with a reason, and the database
holding to the same rule."""

import pytest
from django.db import IntegrityError, connection, transaction

from memories.models import Memory
from memories.paths import (
    MAX_DEPTH,
    MAX_PATH_LENGTH,
    MAX_SEGMENT_LENGTH,
    InvalidPath,
    normalize_path,
    path_prefixes,
)
from tests.conftest import planner_without


@pytest.mark.parametrize(("given", "normal"), [
    ("projects/memory-os/decisions", "projects/memory-os/decisions"),
    ("/Projects/Memory-OS/", "projects/memory-os"),
    ("  a/b_c/v1.2  ", "a/b_c/v1.2"),
    ("", ""),
    ("/", ""),
    ("   ", ""),
    ("/".join(["s"] * MAX_DEPTH), "/".join(["s"] * MAX_DEPTH)),
])
def test_normal_form(given, normal):
    assert normalize_path(given) == normal
    assert normalize_path(normal) == normal  # the normal form is a fixed point


@pytest.mark.parametrize(("given", "reason"), [
    ("a//b", "empty segments"),
    ("a/../b", "'..'"),
    ("./a", "'.'"),
    ("a/b c", "a-z, 0-9"),
    ("a/-b", "start with"),
    ("projets/café", "a-z, 0-9"),
    ("a\\b", "a-z, 0-9"),
    ("/".join(["s"] * (MAX_DEPTH + 1)), f"at most {MAX_DEPTH} segments"),
    ("x" * (MAX_SEGMENT_LENGTH + 1), f"at most {MAX_SEGMENT_LENGTH} characters"),
    ("/".join(["x" * 60] * 5), f"at most {MAX_PATH_LENGTH} characters"),
])
def test_refusals_say_why(given, reason):
    with pytest.raises(InvalidPath, match=reason.replace(".", r"\.").replace("(", r"\(")):
        normalize_path(given)


def test_prefixes_from_the_root():
    assert path_prefixes("") == [""]
    assert path_prefixes("a/b/c") == ["", "a", "a/b", "a/b/c"]


def test_the_database_refuses_a_path_not_in_normal_form(remember):
    memory = remember(path="projects/one")
    for bad in ("Projects/one", "a//b", "a/..", "/a", "a/"):
        with pytest.raises(IntegrityError), transaction.atomic():
            Memory.objects.filter(pk=memory.pk).update(path=bad)
    assert Memory.objects.get(pk=memory.pk).path == "projects/one"


def test_under_means_the_path_and_below_through_the_prefix_index(alice_mind, remember):
    for path in ("a/b", "a/b/c", "a/bc", "a", "", "a_b"):
        remember(key=f"at {path or 'root'}", path=path)
    under = Memory.objects.for_mind(alice_mind).under
    assert sorted(under("a/b").values_list("path", flat=True)) == ["a/b", "a/b/c"]
    assert under("").count() == 6
    # '_' is a LIKE wildcard: unescaped, the prefix 'a_b/' would match 'a/b/c'.
    assert list(under("a_b").values_list("path", flat=True)) == ["a_b"]
    # Enough of the mind elsewhere, counted, for the prefix index to be the clear choice
    # (with a handful of rows, any index on the mind costs the planner the same).
    for number in range(200):
        remember(key=f"elsewhere {number}", path=f"z/{number}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    with planner_without("enable_seqscan"):
        plan = under("a/b").explain()
    assert "memory_mind_path" in plan
