//! The log's field formatter: each field and message is written as the default formatter
//! writes it (`name=value`, strings quoted, the message bare), with control characters and
//! the Unicode line and direction controls written as escapes (`\n`, `\r`, `\0`, `\u{1b}`,
//! `\u{202e}`), so a topic or client id cannot forge a log line or colour a terminal.

use std::fmt::{self, Write};

use tracing::field::Field;
use tracing_subscriber::field::delimited::Delimited;
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::{debug_fn, FieldFn, Writer};

/// The formatter to give `tracing_subscriber::fmt().fmt_fields(..)`.
pub fn escaped_fields() -> EscapedFields {
    debug_fn(write_field as FieldWriter).delimited(" ")
}

type FieldWriter = fn(&mut Writer<'_>, &Field, &dyn fmt::Debug) -> fmt::Result;

/// The field formatter's type.
pub type EscapedFields = Delimited<&'static str, FieldFn<FieldWriter>>;

fn write_field(writer: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug) -> fmt::Result {
    if field.name() != "message" {
        write!(writer, "{}=", field.name())?;
    }
    write!(Escaping(writer), "{value:?}")
}

/// A `fmt::Write` that escapes what it is given on its way to `inner`.
pub struct Escaping<W>(pub W);

impl<W: Write> Write for Escaping<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut safe_from = 0;
        for (at, c) in s.char_indices() {
            if needs_escape(c) {
                self.0.write_str(&s[safe_from..at])?;
                write_escape(&mut self.0, c)?;
                safe_from = at + c.len_utf8();
            }
        }
        self.0.write_str(&s[safe_from..])
    }
}

/// Control characters (C0, DEL, C1) and the characters that break or reorder a line
/// without being control characters: line/paragraph separators and bidirectional overrides.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn write_escape(out: &mut impl Write, c: char) -> fmt::Result {
    match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        '\0' => out.write_str("\\0"),
        other => write!(out, "\\u{{{:x}}}", u32::from(other)),
    }
}

/// `text` as the log writes it (for tests and for messages built before logging).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Writing to a String cannot fail.
    let _ = Escaping(&mut out).write_str(text);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_direction_characters_are_escaped() {
        assert_eq!(escape("plain-topic.1"), "plain-topic.1");
        assert_eq!(escape("a\nb\rc\td\0e"), "a\\nb\\rc\\td\\0e");
        assert_eq!(escape("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape("x\u{7f}y\u{85}z"), "x\\u{7f}y\\u{85}z");
        assert_eq!(escape("abc\u{202e}fed\u{2028}"), "abc\\u{202e}fed\\u{2028}");
        assert_eq!(escape("grüße ✓"), "grüße ✓");
    }

    #[test]
    fn a_forged_line_stays_on_its_line() {
        let forged = "g1\n2026-12-04T00:00:00Z  INFO admin logged in";
        let out = escape(forged);
        assert!(!out.contains('\n'));
        assert!(out.starts_with("g1\\n2026"));
    }
}
