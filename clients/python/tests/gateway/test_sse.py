"""The SSE parser on the framings a server or a proxy may produce (no gateway needed)."""

from __future__ import annotations

from switchyard.gateway import SseMessage, SseParser

TEXT = (
    'event: text.delta\ndata: {"seq": 1}\nid: 1-1\n\n'
    ": heartbeat\n\n"
    "event: end\r\ndata: null\r\n\r\n"
    "event: gap\rdata: {}\r\r"
)
EXPECTED = [
    SseMessage("text.delta", '{"seq": 1}', "1-1"),
    SseMessage("end", "null", None),
    SseMessage("gap", "{}", None),
]


def test_frames_split_anywhere_with_lf_crlf_or_cr_line_ends() -> None:
    for cut in range(len(TEXT) + 1):
        parser = SseParser()
        messages = [*parser.push(TEXT[:cut]), *parser.push(TEXT[cut:])]
        assert messages == EXPECTED, f"cut at {cut}"
        assert parser.comments == 1


def test_frames_split_at_every_pair_of_cut_points() -> None:
    # Three pieces: a CR, its LF and an empty chunk may land in different reads.
    for a in range(len(TEXT) + 1):
        for b in range(a, len(TEXT) + 1):
            parser = SseParser()
            messages = [*parser.push(TEXT[:a]), *parser.push(""), *parser.push(TEXT[a:b]), *parser.push(TEXT[b:])]
            assert messages == EXPECTED, f"cuts at {a}, {b}"


def test_bytes_split_inside_a_utf8_character_and_a_leading_bom() -> None:
    raw = '\ufeffevent: text.delta\ndata: {"text": "h\u00e9llo \u2603 \U0001f600"}\nid: 7-0\n\n'.encode()
    for cut in range(len(raw) + 1):
        parser = SseParser()
        messages = [*parser.push(raw[:cut]), *parser.push(raw[cut:])]
        assert messages == [SseMessage("text.delta", '{"text": "h\u00e9llo \u2603 \U0001f600"}', "7-0")], (
            f"cut at {cut}"
        )


def test_byte_by_byte() -> None:
    parser = SseParser()
    messages: list[SseMessage] = []
    for byte in TEXT.encode():
        messages.extend(parser.push(bytes([byte])))
    assert messages == EXPECTED


def test_multi_line_data_joins_with_lf_and_fields_are_read_as_the_spec_says() -> None:
    parser = SseParser()
    messages = parser.push("data:a\ndata: b\ndata\nretry: 5\nunknown: x\n\n")
    assert messages == [SseMessage("message", "a\nb\n", None)]
    # Only one leading space is dropped; an id with NUL is ignored; a message ends at a blank line only.
    assert parser.push("data:  two spaces\nid: a\0b\n") == []
    assert parser.push("\n") == [SseMessage("message", " two spaces", None)]
    # A blank line with nothing pending dispatches nothing.
    assert parser.push("\n\n\r\n") == []
