// Word-count tokenizer in JavaScript: stateless, like the Rust
// `word-count/tokenizer`. Splits each line into words (runs of letters,
// digits and apostrophes), lowercases them, and emits each word keyed by
// itself. (The engine has no Unicode property classes in regular
// expressions: a letter is a character with case, so caseless scripts are
// not split into words here.)

const isWordChar = (c) => c === "'" || (c >= '0' && c <= '9') || c.toLowerCase() !== c.toUpperCase();

class Tokenizer {
  static open() {
    return new Tokenizer();
  }

  process(ctx, element) {
    let word = '';
    for (const c of element.payloadStr + ' ') {
      if (isWordChar(c)) {
        word += c;
      } else if (word) {
        const w = word.replace(/^'+|'+$/g, '').toLowerCase();
        if (w) ctx.emit(w, w);
        word = '';
      }
    }
  }
}

export const handler = weir.export(Tokenizer);
