// The SSE parser on the framings a server or a proxy may produce.

import assert from "node:assert/strict";
import { test } from "node:test";

import { SseParser } from "../src/index.js";

test("frames split anywhere, with LF, CRLF or CR line ends", () => {
  const text = 'event: text.delta\ndata: {"seq": 1}\nid: 1-1\n\n: heartbeat\n\nevent: end\r\ndata: null\r\n\r\nevent: gap\rdata: {}\r\r';
  for (let cut = 0; cut <= text.length; cut++) {
    const parser = new SseParser();
    const messages = [...parser.push(text.slice(0, cut)), ...parser.push(text.slice(cut))];
    assert.deepEqual(
      messages,
      [
        { event: "text.delta", data: '{"seq": 1}', id: "1-1" },
        { event: "end", data: "null", id: undefined },
        { event: "gap", data: "{}", id: undefined },
      ],
      `cut at ${cut}`,
    );
    assert.equal(parser.comments, 1);
  }
});

test("multi-line data joins with LF; a field without a colon or space is read as the spec says", () => {
  const parser = new SseParser();
  const messages = parser.push("data:a\ndata: b\ndata\nretry: 5\nunknown: x\n\n");
  assert.deepEqual(messages, [{ event: "message", data: "a\nb\n", id: undefined }]);
});

test("a CR ending one chunk and an LF after an empty chunk are one line break", () => {
  const parser = new SseParser();
  const out = [...parser.push("data: a\r"), ...parser.push(""), ...parser.push("\ndata: b\r\n\r\n")];
  assert.deepEqual(out, [{ event: "message", data: "a\nb", id: undefined }]);
});
