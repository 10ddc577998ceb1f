"""memories/crypto.py on its own: sealing and opening credentials content, key rotation."""

import base64

import pytest
from cryptography.fernet import Fernet

from memories.crypto import (
    FERNET_PREFIX,
    CredentialsUnreadable,
    decrypt,
    encrypt,
    open_content,
    rotate_token,
    seal_content,
)

SECRET = "ghp_s3cr3t-token ✓"


@pytest.fixture
def keys(settings):
    """Two fresh keys; ``use(*keys)`` configures them, newest first."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()

    def use(*configured: str) -> None:
        settings.CREDENTIALS_KEYS = list(configured)

    use(old)
    return old, new, use


def test_a_sealed_secret_opens_to_the_same_text(keys):
    token = encrypt(SECRET)
    assert SECRET not in token and token.startswith(FERNET_PREFIX)
    assert decrypt(token) == SECRET


def test_the_same_secret_seals_differently_each_time(keys):
    first, second = encrypt(SECRET), encrypt(SECRET)
    assert first != second
    assert decrypt(first) == decrypt(second) == SECRET


def test_only_credentials_are_sealed(keys):
    assert seal_content("fact", SECRET) == SECRET
    assert open_content("fact", SECRET) == SECRET
    token = seal_content("credentials", SECRET)
    assert token != SECRET and open_content("credentials", token) == SECRET


def test_a_token_of_a_key_no_longer_configured_is_unreadable(keys):
    old, new, use = keys
    token = encrypt(SECRET)
    use(new)
    with pytest.raises(CredentialsUnreadable, match="SYNAPSE_CREDENTIALS_KEYS"):
        decrypt(token)


def test_a_tampered_token_is_unreadable(keys):
    raw = bytearray(base64.urlsafe_b64decode(encrypt(SECRET)))
    raw[-40] ^= 1  # a bit of the ciphertext: the HMAC no longer matches
    with pytest.raises(CredentialsUnreadable):
        decrypt(base64.urlsafe_b64encode(bytes(raw)).decode())


def test_a_token_that_is_not_ascii_is_unreadable_not_a_crash(keys):
    with pytest.raises(CredentialsUnreadable):
        decrypt("gAAAAA✓")


def test_every_configured_key_opens_and_the_newest_seals(keys):
    old, new, use = keys
    sealed_with_old = encrypt(SECRET)
    use(new, old)
    sealed_with_new = encrypt(SECRET)
    assert decrypt(sealed_with_old) == decrypt(sealed_with_new) == SECRET
    use(new)
    assert decrypt(sealed_with_new) == SECRET


def test_rotation_reseals_under_the_newest_key(keys):
    old, new, use = keys
    token = encrypt(SECRET)
    use(new, old)
    rotated = rotate_token(token)
    use(new)  # the old key is gone: the rotated token still opens
    assert rotated != token and decrypt(rotated) == SECRET


def test_rotating_a_token_no_key_opens_is_unreadable(keys):
    old, new, use = keys
    token = encrypt(SECRET)
    use(new)
    with pytest.raises(CredentialsUnreadable):
        rotate_token(token)
