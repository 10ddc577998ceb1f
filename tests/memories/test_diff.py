"""memories/diff.py: folding, word diffs, and the work bound that keeps an adversarial pair of
versions cheap."""

import pytest

from memories.diff import content_diff


def test_content_diff_folds_long_unchanged_runs():
    old = "\n".join(f"line {n}" for n in range(20))
    new = old.replace("line 10", "line ten")
    kinds = [line.kind for line in content_diff(old, new)]
    assert kinds == ["gap"] + ["same"] * 3 + ["del", "ins"] + ["same"] * 3 + ["gap"]
    assert content_diff(old, new)[0].skipped == 7


ADVERSARIAL_OLD = "x\n" * 25_000  # 50,000 characters: the most lines a version can have


ADVERSARIAL_NEW = "x\ny\n" * 12_500  # every other line matches: cubic for SequenceMatcher


def test_an_adversarial_50000_character_diff_takes_the_bounded_path(monkeypatch):
    import memories.diff as diff

    searches = []
    real = diff.SequenceMatcher.find_longest_match
    monkeypatch.setattr(diff.SequenceMatcher, "find_longest_match",
                        lambda self, *args: searches.append(args) or real(self, *args))
    with pytest.raises(diff.DiffTooCostly):
        content_diff(ADVERSARIAL_OLD, ADVERSARIAL_NEW)
    # Refused before any matching: beyond DIFF_MAX_LINES between the unchanged ends.
    assert searches == []
    # Within the line cap, the work budget stops the matching part way.
    with pytest.raises(diff.DiffTooCostly):
        content_diff("x\n" * 300, "x\ny\n" * 150)
    assert 0 < len(searches) < 300


def test_a_small_edit_of_a_long_memory_is_still_diffed_line_by_line():
    old = "".join(f"Line {n} says something about item {n}.\n" for n in range(1200))
    new = old.replace("about item 600.", "about item six hundred.")
    lines = content_diff(old, new)
    assert [line.kind for line in lines] == ["gap", "same", "same", "same", "del", "ins",
                                             "same", "same", "same", "gap"]
    assert ("ins", "six hundred") in lines[5].parts


def test_very_long_changed_lines_are_diffed_whole():
    old, new = "word " * 4000, "word " * 3999 + "changed"
    lines = content_diff(old, new)
    assert [(line.kind, line.parts) for line in lines] == [
        ("del", [("del", old.rstrip("\n"))]), ("ins", [("ins", new)])]
