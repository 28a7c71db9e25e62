"""The send codec's JSON rule for application properties, held against decode_properties.

send_dataframe checks JSON text columns with PROPERTIES_JSON inside its write (Java regex); the
same pattern runs here under Python's ``re`` (3.11+: possessive quantifiers), so these tests
prove what Spark enforces: every text sbdelta writes passes, and every text that passes can be
decoded by a receiver.
"""

import random
import re
import uuid
from datetime import datetime, timezone

import pytest

from sbdelta._app_properties import decode_properties, encode_properties
from sbdelta._store.codec import PROPERTIES_JSON

RULE = re.compile(PROPERTIES_JSON)
T0 = datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=timezone.utc)

WRITTEN = [
    {"k": "v", "n": None, "t": True, "f": False, "x": -1.5, "e": 1e300, "z": 0, "m": -0.0,
     "max": 2 ** 63 - 1, "min": -(2 ** 63)},
    {"b": b"\x00\x01\xff", "empty": b"", "t": T0, "first": datetime(1, 1, 1, tzinfo=timezone.utc),
     "u": uuid.UUID(int=7), "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")},
    {"é\n\"\\": "ü\x00\x1f\u2028"},
]


@pytest.mark.parametrize("props", WRITTEN)
def test_everything_encode_properties_writes_passes_and_decodes(props):
    text = encode_properties(props)
    assert RULE.fullmatch(text)
    assert RULE.fullmatch(f' \n{text.replace(",", " , ")}\t')  # JSON whitespace is fine
    decode_properties(text)


def test_an_empty_object_is_written_as_none_and_passes_when_a_dataframe_gives_it():
    assert encode_properties({}) is None  # stored as none (SEND-5: sizes alike)
    assert RULE.fullmatch("{}") and RULE.fullmatch(" { } ")
    assert decode_properties("{}") == decode_properties(None) == {}


@pytest.mark.parametrize("text", [
    '{"a": {"b": 1}}', '{"a": [1]}',                       # nested object, array
    '{"a": 1', '{1: "a"}', '{"a": 1,}', '{"a": NaN}', '',   # not JSON
    '42', '"x"', 'true', '[{"a": 1}]',                      # not an object at the top level
    '{"a": 9223372036854775808}', '{"a": -9223372036854775809}', '{"a": 1' + '0' * 5000 + '}',
    '{"a": 01}', '{"a": "\x01"}', '{"a": 1}\u2028',
    '{"a": {"$b": "abc"}}', '{"a": {"$b": "AA==", "x": 1}}', '{"a": {"$u": "xyz"}}',
    '{"a": {"$f": "1.0"}}', '{"a": {"$t": "2023-02-29T00:00:00+00:00"}}',
    '{"a": {"$t": "2030-01-01T00:00:00"}}', '{"a": {"$t": "0000-01-01T00:00:00+00:00"}}',
])
def test_texts_that_are_not_a_json_object_of_scalars_fail(text):
    assert not RULE.fullmatch(text)


def test_64_bit_integer_bounds():
    for good in ("9223372036854775807", "-9223372036854775808", "999999999999999999", "-0"):
        assert RULE.fullmatch(f'{{"a": {good}}}'), good
    for bad in ("9223372036854775808", "9300000000000000000", "19223372036854775807"):
        assert not RULE.fullmatch(f'{{"a": {bad}}}'), bad


def test_tagged_dates_pass_exactly_when_they_decode():
    for year in list(range(1, 2101)) + [2400, 9999]:
        for day in ("02-28", "02-29", "02-30", "04-30", "04-31", "12-31", "13-01", "00-10"):
            text = f'{{"a": {{"$t": "{year:04d}-{day}T23:59:59+00:00"}}}}'
            try:
                decode_properties(text)
                decodes = True
            except ValueError:
                decodes = False
            assert bool(RULE.fullmatch(text)) == decodes, text


def test_whatever_passes_decodes():
    """Random edits of written texts: each one the rule lets through is decoded."""
    rng = random.Random(12)
    texts = [encode_properties(p) for p in WRITTEN]
    alphabet = '{}[]":,0123456789-+.eE \\$btufnal'
    passed = 0
    for _ in range(20000):
        chars = list(rng.choice(texts))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(chars) + 1)
            roll = rng.random()
            if roll < 0.4:
                chars.insert(at, rng.choice(alphabet))
            elif chars:
                at = min(at, len(chars) - 1)
                if roll < 0.7:
                    del chars[at]
                else:
                    chars[at] = rng.choice(alphabet)
        text = "".join(chars)
        if RULE.fullmatch(text):
            passed += 1
            decode_properties(text)
    assert passed > 500  # the edits do reach the accepted side
