"""Entity naming rules, storage keys and registry keys."""

import itertools

import pytest

from sbdelta._names import (entity_key, entity_name_list, storage_key, validate_entity_name,
                            validate_entity_path)
from sbdelta.exceptions import InvalidEntityNameError


@pytest.mark.parametrize("name", [
    "queue.1", "contoso/x-servicebus-transfer/0", "Orders", "a", "9", "a_b-c.d", "a/b/c",
    "x" * 260, "a/.b", "a-/b",
])
def test_valid_paths(name):
    assert validate_entity_path(name, kind="queue") == name


@pytest.mark.parametrize("name, problem", [
    ("", "length 0"),
    ("x" * 261, "length 261"),
    ("/orders", "start and end"),
    ("orders/", "start and end"),
    ("orders.", "start and end"),
    ("-orders", "start and end"),
    ("_orders", "start and end"),
    ("a//b", "empty segment"),
    ("a/../b", r"'\.\.'"),
    ("a..b", r"'\.\.'"),
    ("a/./b", r"'\.' segment"),
    ("a b", "forbidden characters ' '"),
    ("a$b", r"forbidden characters '\$'"),
    ("a~b", "forbidden characters '~'"),
    ("a\\b", "forbidden characters"),
    ("caf\u00e9", "forbidden characters"),
    ("a:b", "forbidden characters"),
    ("a\nb", "forbidden characters"),
])
def test_invalid_paths(name, problem):
    with pytest.raises(InvalidEntityNameError, match=problem) as info:
        validate_entity_path(name, kind="topic")
    message = str(info.value)
    assert "topic" in message and repr(name) in message and "Allowed" in message


@pytest.mark.parametrize("value", [None, 5, b"orders", ["orders"]])
def test_path_must_be_str(value):
    with pytest.raises(InvalidEntityNameError, match="expected a str"):
        validate_entity_path(value, kind="queue")


@pytest.mark.parametrize("name", ["sub", "Sub-1", "a.b_c", "x" * 50, "7"])
def test_valid_names(name):
    assert validate_entity_name(name, kind="subscription") == name


@pytest.mark.parametrize("name, problem", [
    ("", "length 0"),
    ("x" * 51, "length 51"),
    ("a/b", "forbidden characters '/'"),
    ("sub.", "start and end"),
    (".sub", "start and end"),
    ("a..b", r"'\.\.'"),
    ("$Default", r"forbidden characters '\$'"),  # only rules may be called $Default
    ("a b", "forbidden"),
])
def test_invalid_names(name, problem):
    with pytest.raises(InvalidEntityNameError, match=problem) as info:
        validate_entity_name(name, kind="subscription")
    assert "subscription" in str(info.value) and repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["$Default", "$default", "$DEFAULT"])
def test_default_rule_name(name):
    assert validate_entity_name(name, kind="rule") == "$Default"


def test_other_dollar_rule_names_rejected():
    with pytest.raises(InvalidEntityNameError, match=r"\$Default"):
        validate_entity_name("$Other", kind="rule")


@pytest.mark.parametrize("path, key", [
    ("Orders", "orders"),
    ("queue.1", "queue.1"),
    ("contoso/x-servicebus-transfer/0", "contoso~x-servicebus-transfer~0"),
    ("orders/$DeadLetterQueue", "orders~~24deadletterqueue"),
    ("$Default", "~24default"),
    ("a/24", "a~24"),
])
def test_storage_key_examples(path, key):
    assert storage_key(path) == key


def test_storage_key_is_case_insensitive():
    assert storage_key("ORDERS/Sub") == storage_key("orders/sub")


TRICKY = ["a", "a/b", "a~b", "a/24", "a/$24", "a/$dlq", "$a", "a/$a", "24", "$24", "a.b", "a/b/c",
          "a/b.c", "a-b", "a_b", "x" * 260, "x" * 259 + "y", "x" * 200 + "/" + "x" * 59,
          "x" * 201, "x" * 200, "b/$deadletterqueue", "b/24deadletterqueue"]


def test_storage_key_is_injective_and_safe():
    keys = {}
    for path in TRICKY:
        try:
            key = storage_key(path)
        except InvalidEntityNameError:
            assert "~" in path  # only the path with a forbidden '~' is refused here
            continue
        assert "/" not in key and ".." not in key and key[0] not in "._"
        assert len(key) <= 200
        assert key not in keys, (path, keys.get(key))
        keys[key] = path
    assert len(keys) == len(TRICKY) - 1


def test_storage_key_injective_over_generated_paths():
    alphabet = ["a", "b", "2", "4", "/", "$", "."]
    keys = {}
    for n in range(1, 6):
        for chars in itertools.product(alphabet, repeat=n):
            path = "".join(chars)
            try:
                key = storage_key(path)
            except InvalidEntityNameError:
                continue
            assert "/" not in key and ".." not in key and key[0] not in "._"
            assert keys.setdefault(key, path) == path, (path, keys[key])
    assert len(keys) > 1000


def test_long_keys_are_hashed_and_distinct():
    a, b = "q" * 250 + "a", "q" * 250 + "b"
    assert storage_key(a) != storage_key(b)
    assert len(storage_key(a)) == 200 and "~~~" in storage_key(a)


@pytest.mark.parametrize("path", ["", "/a", "a/", "a//b", "a$b", "a$", "$", "a/$", "$$a",
                                  "a~b", "..", "a/../b", "a/./b", ".hidden", "_delta_log",
                                  "a..b", "a b", None, 5])
def test_storage_key_rejects_unsafe(path):
    with pytest.raises(InvalidEntityNameError, match="storage key"):
        storage_key(path)


def test_entity_key():
    assert entity_key("Contoso/Orders") == "contoso/orders"
    assert entity_key("orders") == entity_key("ORDERS")


@pytest.mark.parametrize("names, listed", [
    (None, []), ([], []), ("orders", ["orders"]), (("a", "t/Subscriptions/s"),
                                                   ["a", "t/Subscriptions/s"])])
def test_entity_name_lists_take_one_name_or_a_list(names, listed):
    assert entity_name_list(names, what="entities") == listed


@pytest.mark.parametrize("names, why", [
    (5, "got int 5"), (b"orders", "got bytes"), ({"orders": 1}, "got dict"),
    (["orders", 7], "7 \\(int\\) is not a name"), ([None], "None \\(NoneType\\)")])
def test_entity_name_lists_refuse_what_is_not_a_name_saying_what_is_allowed(names, why):
    with pytest.raises(InvalidEntityNameError,
                       match=f"entities must be a name \\(str\\), or a list of names.*{why}"):
        entity_name_list(names, what="entities")
