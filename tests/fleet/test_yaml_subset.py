"""The YAML a web configuration file is written in: read as a YAML library reads it, and
what the reader does not support refused with its line, never guessed at."""

from __future__ import annotations

import pytest
import yaml

from gputui.fleet.yaml_subset import YamlSubsetError, parse

# exporter-toolkit's sample file, with the ways people write such files: comments, a
# document start, quoted and plain hashes, deeper indentation, empty sections.
SAMPLE = """\ufeff---
# TLS and basic authentication configuration example.
tls_server_config:
    cert_file: server.crt   # relative to this file
    key_file: "server.key"
    min_version: TLS12
    prefer_server_cipher_suites: true

http_server_config:
  http2: false
  headers:
    X-Frame-Options: 'deny'
    Content-Security-Policy: "default-src 'self' # not a comment"  # a comment
    Strict-Transport-Security: max-age=1 'x # y'  # plain, with a quote inside
    X-XSS-Protection:

basic_auth_users:
  alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze
  'bob smith': '$2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m'
  "carol#1": "it''s \\"quoted\\" \\\\ here"
  dave: 'it''s'
  erin: ~
rate_limit: {}
"""


def test_a_realistic_file_reads_as_a_yaml_library_reads_it() -> None:
    assert parse(SAMPLE) == yaml.safe_load(SAMPLE.lstrip("\ufeff"))
    assert parse(SAMPLE)["basic_auth_users"]["dave"] == "it's"  # type: ignore[index]


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_an_empty_document_is_an_empty_mapping(text: str) -> None:
    assert parse(text) == {}


@pytest.mark.parametrize(("text", "line", "words"), [
    ("users:\n  - alice\n", 2, "lists are not supported"),
    ("a: &x b\n", 1, "anchors"),
    ("a: *x\n", 1, "aliases"),
    ("a: !!binary aGk=\n", 1, "tags"),
    ("tls_server_config:\n  cert: |\n    -----BEGIN\n", 2, "multi-line values (|)"),
    ("a: [b, c]\n", 1, "flow lists"),
    ("a: {b: c}\n", 1, "flow mappings"),
    ("a:\n\tb: c\n", 2, "tabs"),
    ("a: 1\na: 2\n", 2, "duplicate key 'a'"),
    ("a: 'open\n", 1, "no closing '"),
    ('a: "x\\n"\n', 1, "escape \\n is not supported"),
    ("a: b\n  c\n", 2, "unexpected indentation"),
    ("a:\n    b: 1\n  c: 2\n", 3, "matches no enclosing key"),
    ("a: b\n---\nc: d\n", 2, "only one YAML document"),
    ("just words\n", 1, "expected 'key: value'"),
    ("a: b: c\n", 1, "cannot hold ': '"),
    ("a: 'b' c\n", 1, "unexpected text after the quoted value"),
])
def test_what_it_does_not_read_is_refused_with_its_line(text: str, line: int,
                                                        words: str) -> None:
    with pytest.raises(YamlSubsetError) as err:
        parse(text)
    assert str(err.value).startswith(f"line {line}: ")
    assert words in str(err.value)
