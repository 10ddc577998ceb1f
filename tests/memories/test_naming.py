"""memories/naming.py: tags normalised, and the key derived for a memory stored without one."""

from memories.naming import derive_key, normalize_tags


def test_tags_are_trimmed_lowercased_and_deduplicated_in_first_seen_order():
    assert normalize_tags([" Work ", "home", "WORK", "", "  ", "Home", "q2"]) == [
        "work", "home", "q2"]


def test_a_derived_key_is_the_first_words_and_a_hash_of_the_content():
    key = derive_key("Deploys happen on Tuesdays, never on Fridays!")
    assert key.startswith("deploys_happen_on_tuesdays_never_")
    assert key == derive_key("Deploys happen on Tuesdays, never on Fridays!")
    assert key != derive_key("Deploys happen on Tuesdays, never on Fridays.")


def test_content_without_words_still_gets_a_key():
    assert derive_key("!!! ???").startswith("memory_")


def test_a_credentials_key_holds_no_word_of_the_secret(settings):
    key = derive_key("hunter2 is the password", "credentials")
    assert key.startswith("credentials_") and "hunter2" not in key
    assert key == derive_key("hunter2 is the password", "credentials")
    settings.SECRET_KEY = "another instance"  # keyed: another instance derives another key
    assert derive_key("hunter2 is the password", "credentials") != key


def test_the_path_joins_a_derived_key_but_not_at_the_root():
    content = "Deploys go out on Fridays"
    at_root = derive_key(content, "fact")
    assert derive_key(content, "fact", "") == at_root  # keys derived before paths still match
    one = derive_key(content, "fact", "projects/a")
    other = derive_key(content, "fact", "projects/b")
    assert len({at_root, one, other}) == 3
    assert one.startswith("deploys_go_out_on_fridays_")
    assert derive_key(content, "fact", "projects/a") == one
    secret = derive_key("hunter2", "credentials", "projects/a")
    assert secret != derive_key("hunter2", "credentials") and "hunter2" not in secret
