//! A parser for Java `.properties` text (`java.util.Properties.load`), the format of
//! Kafka's `server.properties`.
//!
//! Rules kept from Java: a line whose first non-blank character is `#` or `!` is a
//! comment; a line ending in an odd number of backslashes continues on the next line,
//! whose leading blanks are dropped; the key ends at the first unescaped `=`, `:` or
//! blank, and one `=`/`:` with the blanks around it separates it from the value;
//! `\t \n \r \f \uXXXX` escapes are decoded and any other escaped character stands for
//! itself. A later duplicate key wins, as in Java. Pure: takes text, returns pairs.

/// Parses properties text into `(key, value)` pairs in file order.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let first = first.trim_start_matches([' ', '\t', '\x0c']);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::from(first);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
        }
        out.push(split_key_value(&logical));
    }
    out
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Splits one logical line at the first unescaped separator and unescapes both halves.
fn split_key_value(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut escaped = false;
    while let Some(&c) = chars.get(i) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            break;
        }
        i += 1;
    }
    let key: String = chars.get(..i).unwrap_or_default().iter().collect();
    let mut j = i;
    while chars.get(j).is_some_and(|&c| is_blank(c)) {
        j += 1;
    }
    if chars.get(j).is_some_and(|&c| c == '=' || c == ':') {
        j += 1;
        while chars.get(j).is_some_and(|&c| is_blank(c)) {
            j += 1;
        }
    }
    let value: String = chars.get(j..).unwrap_or_default().iter().collect();
    (unescape(&key), unescape(&value))
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    // Java throws on a malformed \u escape; keeping the text is kinder and
                    // the value then fails its own validation if it matters.
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_properties(text)
    }

    fn p(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let text = "# a comment\n  ! another\n\nnode.id=3\n";
        assert_eq!(pairs(text), vec![p("node.id", "3")]);
    }

    #[test]
    fn equals_colon_and_blank_all_separate_keys_from_values() {
        let text = "a=1\nb: 2\nc 3\n  d  =  4  \ne=\nf\n";
        assert_eq!(
            pairs(text),
            vec![
                p("a", "1"),
                p("b", "2"),
                p("c", "3"),
                p("d", "4  "),
                p("e", ""),
                p("f", "")
            ]
        );
    }

    #[test]
    fn only_the_first_separator_counts() {
        assert_eq!(
            pairs("listeners=PLAINTEXT://:9092"),
            vec![p("listeners", "PLAINTEXT://:9092")]
        );
        assert_eq!(pairs("a=b=c"), vec![p("a", "b=c")]);
    }

    #[test]
    fn a_trailing_backslash_continues_the_line() {
        let text = "log.dirs=/a,\\\n    /b,\\\n\t/c\nnext=1";
        assert_eq!(pairs(text), vec![p("log.dirs", "/a,/b,/c"), p("next", "1")]);
    }

    #[test]
    fn an_escaped_backslash_does_not_continue_the_line() {
        assert_eq!(
            pairs("path=C:\\\\\nx=1"),
            vec![p("path", "C:\\"), p("x", "1")]
        );
    }

    #[test]
    fn escapes_are_decoded_in_keys_and_values() {
        assert_eq!(
            pairs("my\\=key=a\\tb\\u0041\\#"),
            vec![p("my=key", "a\tbA#")]
        );
    }

    #[test]
    fn windows_line_endings_are_accepted() {
        assert_eq!(pairs("a=1\r\nb=2\r\n"), vec![p("a", "1"), p("b", "2")]);
    }
}
