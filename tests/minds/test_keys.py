"""minds/keys.py on its own: the shape of a Mind Key, its lookup prefix and its hash."""

import pytest

from minds.keys import (
    KEY_PREFIX,
    LOOKUP_LENGTH,
    SECRET_LENGTH,
    generate_key,
    hash_key,
    key_matches,
    parse_lookup,
)
from synapse.ids import ALPHABET


def test_a_new_key_is_the_prefix_a_lookup_and_a_secret_and_only_its_hash_is_kept():
    new = generate_key()
    assert new.plaintext.startswith(KEY_PREFIX)
    assert len(new.plaintext) == len(KEY_PREFIX) + LOOKUP_LENGTH + SECRET_LENGTH
    assert set(new.plaintext[len(KEY_PREFIX):]) <= set(ALPHABET)
    assert new.lookup == new.plaintext[len(KEY_PREFIX):len(KEY_PREFIX) + LOOKUP_LENGTH]
    assert new.last4 == new.plaintext[-4:]
    assert new.hashed == hash_key(new.plaintext) and len(new.hashed) == 64
    assert new.plaintext not in new.hashed


def test_two_keys_share_nothing():
    first, second = generate_key(), generate_key()
    assert first.lookup != second.lookup and first.hashed != second.hashed


def test_the_lookup_of_a_well_formed_key_is_its_first_twelve_characters():
    new = generate_key()
    assert parse_lookup(new.plaintext) == new.lookup


@pytest.mark.parametrize("presented", [
    "", "mk_", "mk_short", "xx_" + "a" * 52, "mk_" + "a" * 51, "mk_" + "a" * 53,
    "mk_" + "!" * 52, "mk_" + "a" * 51 + "é",
])
def test_anything_else_has_no_lookup(presented):
    assert parse_lookup(presented) is None


def test_a_key_matches_its_own_hash_only():
    new = generate_key()
    assert key_matches(new.plaintext, new.hashed)
    tampered = new.plaintext[:-1] + ("a" if new.plaintext[-1] != "a" else "b")
    assert not key_matches(tampered, new.hashed)
    assert not key_matches(generate_key().plaintext, new.hashed)
