"""Word-count tokenizer in Python: stateless, like the Rust
`word-count/tokenizer`. Splits each line into words (runs of letters,
digits and apostrophes), lowercases them, and emits each word keyed by
itself so the counter downstream is partitioned by word."""

from __future__ import annotations

import weir


class Tokenizer:
    @staticmethod
    def open(ctx: weir.OpenContext) -> Tokenizer:
        return Tokenizer()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        word: list[str] = []
        for c in element.payload_str + " ":
            if c.isalnum() or c == "'":
                word.append(c)
            elif word:
                w = "".join(word).strip("'").lower()
                if w:
                    ctx.emit(w, key=w)
                word = []


Handler = weir.export(Tokenizer)
