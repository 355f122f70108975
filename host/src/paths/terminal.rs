//! Text the host did not write, made safe for a terminal or a log. A name,
//! key or message read from a stored file (`_metadata`, a state file, a
//! recording), from the network, or written by a guest may hold control
//! characters: a carriage return or an escape sequence that rewrites what
//! a reader sees (a forged log line, a cleared screen, a changed window
//! title), or a bidirectional override that reorders it. Every such
//! character is written escaped, as Rust writes it (`\u{1b}`); text without
//! any is passed on as it is.
//!
//! The one rule for what is escaped is [`is_unsafe`]; the host's error
//! lines, log fields and guest log lines all go through it.

use std::borrow::Cow;
use std::fmt::{self, Write};

/// Whether `c` must not reach a terminal as it is: a control character
/// (C0, DEL, C1: carriage return, escape, backspace ...), a line or
/// paragraph separator, or a bidirectional formatting character (marks,
/// embeddings, overrides, isolates), which reorders how the rest of a line
/// displays.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` with every character [`is_unsafe`] names written as `\u{..}`
/// (line feeds included: one line stays one line); borrowed when there is
/// none, the usual case.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_where(text, is_unsafe)
}

/// [`escape`], but line feeds kept: for a message whose lines are its own
/// structure (an error with its causes, one per line). A line it quotes
/// cannot carry a carriage return back over what came before.
pub fn escape_keeping_lines(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c != '\n' && is_unsafe(c))
}

fn escape_where(text: &str, unsafe_here: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&unsafe_here) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_here(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A value shown through its `Display` with [`escape`] applied as it is
/// written, without a copy: for log fields and long messages.
pub struct Escaped<T>(pub T);

impl<T: fmt::Display> fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(EscapingWriter(f), "{}", self.0)
    }
}

/// Writes through to `0`, escaping what [`is_unsafe`] names.
struct EscapingWriter<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for EscapingWriter<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Runs of safe text go through whole; `write!` hands over its
        // pieces one by one, so no character is ever split between calls.
        let mut rest = s;
        while let Some(at) = rest.find(is_unsafe) {
            self.0.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().expect("find returned a character's start");
            for e in c.escape_unicode() {
                self.0.write_char(e)?;
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character the module must escape, from the Unicode classes it
    /// names, listed apart from [`is_unsafe`]'s own ranges.
    fn listed_unsafe() -> Vec<char> {
        let c0 = (0u32..0x20).chain([0x7f]).chain(0x80..0xa0);
        let bidi = [0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069];
        c0.chain(bidi).chain([0x2028, 0x2029]).map(|u| char::from_u32(u).unwrap()).collect()
    }

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert!(matches!(escape("plain text, ünïcode, 日本"), Cow::Borrowed(_)));
        assert_eq!(
            escape("a\rb\x1b[31mc\u{202e}d\u{2066}e\u{7f}\u{85}"),
            "a\\u{d}b\\u{1b}[31mc\\u{202e}d\\u{2066}e\\u{7f}\\u{85}"
        );
        assert_eq!(escape("tab\there\nnext"), "tab\\u{9}here\\u{a}next");
        for c in listed_unsafe() {
            let shown = escape(&c.to_string()).into_owned();
            assert_eq!(shown, format!("\\u{{{:x}}}", c as u32), "{:x}", c as u32);
        }
        // Neighbours of the ranges pass.
        for c in ['\u{a0}', '\u{2027}', '\u{202f}', '\u{2065}', '\u{206a}', '\u{200d}', ' ', '~'] {
            assert_eq!(escape(&c.to_string()), c.to_string(), "{:x}", c as u32);
        }
    }

    #[test]
    fn a_multi_line_message_keeps_its_lines_and_nothing_else() {
        let message = "error: cannot restore\n  caused by: state '\x1b[2Jx\r' \u{202e}gnp.exe\n";
        let shown = escape_keeping_lines(message);
        assert_eq!(shown, "error: cannot restore\n  caused by: state '\\u{1b}[2Jx\\u{d}' \\u{202e}gnp.exe\n");
        assert_eq!(shown.lines().count(), 2);
        assert!(matches!(escape_keeping_lines("two\nlines"), Cow::Borrowed(_)));
    }

    #[test]
    fn escaped_display_writes_what_escape_returns() {
        let texts = ["", "plain", "\x1b]0;title\x07", "a\u{202e}b\u{2069}", "ü\u{85}ü", "\r\n"];
        for text in texts {
            assert_eq!(Escaped(text).to_string(), escape(text), "{text:?}");
            assert_eq!(Escaped(format_args!("<{text}>")).to_string(), format!("<{}>", escape(text)));
        }
    }
}
