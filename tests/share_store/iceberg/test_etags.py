"""`If-None-Match` as RFC 9110 reads it, and which answers get a tag (issue 52)."""

from __future__ import annotations

from share_store.iceberg.etags import none_match, shared_load_tag, table_load_tag


def test_if_none_match_compares_weakly_takes_lists_and_star() -> None:
    tag = table_load_tag("s3://wh/ns/t/metadata/00001.metadata.json")
    assert tag is not None and tag.startswith('"') and tag.endswith('"')
    assert none_match(tag, tag) and none_match(f"W/{tag}", tag) and none_match("*", tag)
    assert none_match(f'"a", "b,c" , {tag}', tag)
    assert not none_match('"a", "b,c"', tag) and not none_match(tag[1:-1], tag)
    assert not none_match(None, tag) and not none_match("", tag)
    # An untagged answer (one with credentials) matches nothing, not even `*`.
    assert not none_match("*", None)


def test_what_the_answer_is_made_of_makes_the_tag() -> None:
    location = "s3://wh/ns/t/metadata/00001.metadata.json"
    plain = table_load_tag(location)
    assert plain == table_load_tag(location, "all", {})
    assert plain != table_load_tag(location, "refs")
    assert plain != table_load_tag("s3://wh/ns/t/metadata/00002.metadata.json")
    assert table_load_tag(location, config={"k": "v"}) not in (plain, None)
    assert table_load_tag(location, config={"k": "v"}, expiring=True) is None
    assert table_load_tag(location, credentials=[{"prefix": "s3://wh/"}]) is None
    assert table_load_tag(None) is None  # a staged create has no metadata file yet
    body = b'{"metadata-location":"x"}'
    acme = shared_load_tag(body, "acme", {"nation": "JAPAN"}, vended=False)
    assert acme != shared_load_tag(body, "zeta", {"nation": "JAPAN"}, vended=False)
    assert acme != shared_load_tag(body, "acme", {"nation": "PERU"}, vended=False)
    assert shared_load_tag(body, "acme", {}, vended=True) is None
