"""Metadata filter parsing, its Milvus expression and its Python predicate."""

from __future__ import annotations

import re
from typing import Any

import pytest

from services.retriever.backends.base import ChunkRecord
from services.retriever.filters import (
    Condition,
    MetadataFilter,
    MirroredList,
    matches,
    parse_filter,
    quote_string,
    to_milvus_expr,
)
from shared.errors import InvalidArgument


def expr(d: dict[str, Any]) -> str:
    f = parse_filter(d)
    assert f is not None
    return to_milvus_expr(f)


def chunk(
    metadata: dict[str, Any], document_id: str = "doc", document_name: str = ""
) -> ChunkRecord:
    return ChunkRecord(
        id="c",
        document_id=document_id,
        text="t",
        vector=[],
        metadata=metadata,
        document_name=document_name,
    )


# -- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize("empty", [None, {}])
def test_no_filter(empty: dict[str, Any] | None) -> None:
    assert parse_filter(empty) is None


def test_equality_shorthand_and_operators_are_anded() -> None:
    f = parse_filter({"lang": "en", "year": {"$gte": 2020, "$lt": 2024}})
    assert f == MetadataFilter(
        (
            Condition("lang", "$eq", "en"),
            Condition("year", "$gte", 2020),
            Condition("year", "$lt", 2024),
        )
    )


def test_integral_floats_from_a_struct_become_ints() -> None:
    f = parse_filter({"year": 2020.0, "page": {"$in": [1.0, 2.5]}})
    assert f is not None
    assert f.conditions[0].value == 2020 and type(f.conditions[0].value) is int
    assert f.conditions[1].value == (1, 2.5)
    assert expr({"year": 2020.0}) == 'metadata["year"] == 2020'


def test_booleans_stay_booleans() -> None:
    f = parse_filter({"draft": True})
    assert f is not None and f.conditions[0].value is True
    assert expr({"draft": False}) == 'metadata["draft"] == false'


@pytest.mark.parametrize(
    ("flt", "fragment"),
    [
        ({"year": {"$regex": "x"}}, "unknown operator '$regex'"),
        ({"year": {"$in": []}}, "empty list"),
        ({"year": {"$in": "2020"}}, "$in needs a list"),
        ({"year": {"$eq": [2020]}}, "lists go with $in or $nin"),
        ({"year": [2020, 2021]}, "lists go with $in or $nin"),
        ({"year": {"$gt": {"$lt": 3}}}, "got an object"),
        ({"year": {"$in": [{"a": 1}]}}, "got an object"),
        ({"year": {}}, "empty operator object"),
        ({"year": {"$gt": True}}, "not a boolean"),
        ({"year": None}, "got NoneType"),
        ({"year": float("nan")}, "is not a number"),
        ({"year": float("inf")}, "is not a number"),
        ({"year": 2**70}, "does not fit in 64 bits"),
        ({"bad-name": 1}, "field name 'bad-name' is invalid"),
        ({"1st": 1}, "field name '1st' is invalid"),
        ({"": 1}, "field name '' is invalid"),
        ({"x" * 65: 1}, "is invalid"),
        ({'a"]': 1}, "is invalid"),
        ({"$or": [{"a": 1}]}, "$or is not available"),
        ({"document_id": 5}, "document_id is text"),
        ({"document_name": {"$in": ["a", 1]}}, "document_name is text"),
        ({"tag": "a\x00b"}, "control characters"),
        ({"tag": {"$nin": ["ok", "bad\x1b"]}}, "control characters"),
    ],
)
def test_invalid_filters_name_the_field_and_operator(flt: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        parse_filter(flt)
    assert fragment in err.value.message


def test_error_names_field_and_operator() -> None:
    with pytest.raises(InvalidArgument) as err:
        parse_filter({"year": {"$between": [1, 2]}})
    assert "'year'" in err.value.message and "$between" in err.value.message
    assert "$gte" in err.value.message  # and lists what would work


def test_non_dict_filter_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        parse_filter(["year", 2020])  # type: ignore[arg-type]


def test_too_many_values_or_conditions() -> None:
    with pytest.raises(InvalidArgument, match="limit is 1024"):
        parse_filter({"x": {"$in": list(range(1025))}})
    with pytest.raises(InvalidArgument, match="limit is 64"):
        parse_filter({f"f{i}": i for i in range(65)})


# -- Milvus expression -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"year": 2021}, 'metadata["year"] == 2021'),
        ({"year": {"$ne": 2021}}, 'metadata["year"] != 2021'),
        ({"year": {"$gt": 1.5}}, 'metadata["year"] > 1.5'),
        ({"year": {"$gte": -3}}, 'metadata["year"] >= -3'),
        ({"year": {"$lt": 1e20}}, 'metadata["year"] < 1e+20'),
        ({"score": {"$lte": 1e-5}}, 'metadata["score"] <= 1e-05'),
        ({"tag": {"$in": ["a", "b"]}}, '(metadata["tag"] == "a" or metadata["tag"] == "b")'),
        ({"tag": {"$nin": ["a", 2]}}, '(metadata["tag"] != "a" and metadata["tag"] != 2)'),
        ({"document_id": "d1"}, 'document_id == "d1"'),
        ({"document_id": {"$in": ["d1", "d2"]}}, 'document_id in ["d1", "d2"]'),
        ({"document_name": {"$nin": ["x"]}}, 'document_name not in ["x"]'),
        ({"a": 1, "document_id": "d"}, 'metadata["a"] == 1 and document_id == "d"'),
    ],
)
def test_milvus_expressions(flt: dict[str, Any], expected: str) -> None:
    assert expr(flt) == expected


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ('tricky\\"', r'"tricky\\\""'),
        ("two\nlines\ttab\r", r'"two\nlines\ttab\r"'),
        ("it's", '"it\'s"'),
        ("ünïcødé", '"ünïcødé"'),
    ],
)
def test_strings_are_escaped(value: str, quoted: str) -> None:
    assert quote_string(value) == quoted


def test_injection_attempt_stays_inside_the_literal() -> None:
    hostile = '" or 1 == 1 or metadata["x"] == "'
    assert expr({"tag": hostile}) == r'metadata["tag"] == "\" or 1 == 1 or metadata[\"x\"] == \""'


def test_expression_parses_back_to_the_same_values() -> None:
    # Milvus Lite ships the same expression grammar as the server: the string literal it
    # reads must be exactly the value we were given.
    parser = pytest.importorskip("milvus_lite.search.filter")
    hostile = 'a"b\\c\\"d\n' + "'e"
    ast = parser.parse_expr(expr({"tag": hostile}))
    assert ast.right.value == hostile  # type: ignore[attr-defined]


# -- Python predicate ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flt", "metadata", "expected"),
    [
        ({"year": 2021}, {"year": 2021}, True),
        ({"year": 2021.0}, {"year": 2021}, True),
        ({"year": 2021}, {"year": 2021.0}, True),
        ({"year": 2021}, {"year": "2021"}, False),
        ({"year": 2021}, {}, False),
        ({"year": {"$ne": 2021}}, {"year": 2020}, True),
        ({"year": {"$ne": 2021}}, {}, False),  # missing keys fail every condition
        ({"year": {"$ne": 2021}}, {"year": None}, False),
        ({"year": {"$gte": 2020}}, {"year": 2020}, True),
        ({"year": {"$gt": 2020}}, {"year": 2020}, False),
        ({"year": {"$lt": 2020}}, {"year": 2019.5}, True),
        ({"year": {"$lte": 2020}}, {"year": "2019"}, False),  # no string/number ordering
        ({"year": {"$gte": 2020, "$lt": 2022}}, {"year": 2021}, True),
        ({"year": {"$gte": 2020, "$lt": 2022}}, {"year": 2022}, False),
        ({"name": {"$gt": "b"}}, {"name": "c"}, True),
        ({"tag": {"$in": ["a", "b"]}}, {"tag": "b"}, True),
        ({"tag": {"$in": ["a", "b"]}}, {"tag": "c"}, False),
        ({"tag": {"$nin": ["a", "b"]}}, {"tag": "c"}, True),
        ({"tag": {"$nin": ["a", "b"]}}, {"tag": "a"}, False),
        ({"tag": {"$nin": ["a"]}}, {}, False),
        ({"flag": True}, {"flag": True}, True),
        ({"flag": True}, {"flag": 1}, False),  # booleans never equal numbers
        ({"count": 1}, {"count": True}, False),
        ({"flag": {"$ne": True}}, {"flag": False}, True),
        ({"tag": "a"}, {"tag": ["a", "b"]}, False),
        ({"tag": {"$ne": "a"}}, {"tag": ["a", "b"]}, True),
        ({"a": 1, "b": 2}, {"a": 1, "b": 2}, True),
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, False),
    ],
)
def test_matches(flt: dict[str, Any], metadata: dict[str, Any], expected: bool) -> None:
    assert matches(parse_filter(flt), chunk(metadata)) is expected


def test_matches_columns_not_metadata() -> None:
    c = chunk({"document_id": "meta"}, document_id="col", document_name="Report")
    assert matches(parse_filter({"document_id": "col"}), c)
    assert not matches(parse_filter({"document_id": "meta"}), c)
    assert matches(parse_filter({"document_name": {"$in": ["Report", "x"]}}), c)


def test_no_filter_matches_everything() -> None:
    assert matches(None, chunk({}))


# -- membership and $and (the gateway's mandatory access filter) --------------------------


def test_and_flattens_into_one_conjunction() -> None:
    f = parse_filter({"$and": [{"lang": "en"}, {"$and": [{"year": 2021}]}], "tag": "a"})
    assert f == MetadataFilter(
        (
            Condition("lang", "$eq", "en"),
            Condition("year", "$eq", 2021),
            Condition("tag", "$eq", "a"),
        )
    )


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"$or": [{"a": 1}, {"b": 2}]}, "$or is not available"),
        ({"$and": {"a": 1}}, "$and needs a list"),
        ({"$and": [1]}, "$and needs a list"),
        ({"$and": [{"$and": [{"$and": [{"$and": [{"$and": [{"a": 1}]}]}]}]}]}, "more than 4"),
        ({"document_id": {"$any": ["a"]}}, "holds one string"),
        ({"tags": {"$any": []}}, "empty list"),
        ({"tags": {"$unset_or_any": "a"}}, "needs a list"),
        ({"$and": [{"a": {"$in": list(range(60))}}] + [{"b": 1}] * 70}, "conditions"),
    ],
)
def test_bad_and_and_membership(bad: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(fragment)):
        parse_filter(bad)


def test_membership_milvus_expressions() -> None:
    assert expr({"tags": {"$any": ["a", 2]}}) == 'json_contains_any(metadata["tags"], ["a", 2])'
    assert expr({"access_groups": {"$unset_or_any": ['t"x']}}) == (
        '(not exists metadata["access_groups"] or '
        'json_contains_any(metadata["access_groups"], ["t\\"x"]))'
    )


def test_membership_on_mirrored_columns() -> None:
    """A list mirrored into columns is tested on them; other keys, other operators and
    values that are not strings keep the JSON test."""
    mirrored = {"access_groups": MirroredList("listed", ("s0", "s1"))}

    def on_columns(d: dict[str, Any]) -> str:
        f = parse_filter(d)
        assert f is not None
        return to_milvus_expr(f, mirrored)

    assert on_columns({"access_groups": {"$unset_or_any": ['t"x', "b"]}}) == (
        '(listed == false or s0 in ["t\\"x", "b"] or s1 in ["t\\"x", "b"])'
    )
    assert on_columns({"access_groups": {"$any": ["a"]}}) == '(s0 in ["a"] or s1 in ["a"])'
    assert on_columns({"$and": [{"year": 2021}, {"access_groups": {"$any": ["a"]}}]}) == (
        'metadata["year"] == 2021 and (s0 in ["a"] or s1 in ["a"])'
    )
    assert on_columns({"access_groups": {"$any": ["a", 1]}}) == expr(
        {"access_groups": {"$any": ["a", 1]}}
    )
    assert on_columns({"access_groups": {"$eq": "a"}}) == 'metadata["access_groups"] == "a"'
    assert on_columns({"tags": {"$any": ["a"]}}) == 'json_contains_any(metadata["tags"], ["a"])'


@pytest.mark.parametrize(
    ("metadata", "any_", "unset_or_any"),
    [
        ({"g": ["a", "b"]}, True, True),
        ({"g": ["c"]}, False, False),
        ({"g": []}, False, False),
        ({"g": "a"}, False, False),  # a scalar where a list belongs fails closed
        ({"g": None}, False, True),
        ({}, False, True),
        ({"g": [True, 1]}, False, False),  # kinds kept apart: "a" is not True
    ],
)
def test_membership_predicate(metadata: dict[str, Any], any_: bool, unset_or_any: bool) -> None:
    assert matches(parse_filter({"g": {"$any": ["a"]}}), chunk(metadata)) is any_
    assert matches(parse_filter({"g": {"$unset_or_any": ["a"]}}), chunk(metadata)) is unset_or_any
