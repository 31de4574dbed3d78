//! The JAAS text of a `sasl.jaas.config` value, as Kafka's `JaasConfig` reads it:
//! `<LoginModule class> <flag> [name=value]... ;` with values quoted (`"…"`, `\` escapes the
//! next character) or bare words. A broker's `listener.name.<l>.<mechanism>.sasl.jaas.config`
//! holds exactly one login module (Kafka refuses more). Pure; values are secrets and never
//! appear in an error message.

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub options: BTreeMap<String, String>,
}

/// Options hold passwords: never print them.
impl std::fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

const FLAGS: &[&str] = &["required", "requisite", "sufficient", "optional"];

/// Parses one entry; the error names what is wrong, never a value.
pub fn parse_jaas(text: &str) -> Result<JaasEntry, String> {
    let mut tokens = Tokens {
        chars: text.chars().peekable(),
    };
    let login_module = match tokens.next()? {
        Some(Token::Word(w)) => w,
        _ => return Err("Login module not specified in JAAS config".to_owned()),
    };
    match tokens.next()? {
        Some(Token::Word(w)) if FLAGS.contains(&w.to_ascii_lowercase().as_str()) => {}
        Some(Token::Word(w)) => {
            return Err(format!(
                "Invalid login module control flag '{w}' in JAAS config"
            ))
        }
        _ => return Err("Login module control flag not specified in JAAS config".to_owned()),
    }
    let mut options = BTreeMap::new();
    loop {
        match tokens.next()? {
            Some(Token::Semicolon) => break,
            Some(Token::Word(name)) => {
                if tokens.next()? != Some(Token::Equals) {
                    return Err(format!(
                        "Value not specified for key '{name}' in JAAS config"
                    ));
                }
                match tokens.next()? {
                    Some(Token::Word(value)) | Some(Token::Quoted(value)) => {
                        options.insert(name, value);
                    }
                    _ => {
                        return Err(format!(
                            "Value not specified for key '{name}' in JAAS config"
                        ))
                    }
                }
            }
            _ => return Err("JAAS config entry not terminated by semi-colon".to_owned()),
        }
    }
    if tokens.next()?.is_some() {
        return Err("JAAS config property contains 2 login modules, should be 1 module".to_owned());
    }
    Ok(JaasEntry {
        login_module,
        options,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

struct Tokens<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Tokens<'_> {
    fn next(&mut self) -> Result<Option<Token>, String> {
        while self.chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(c) = self.chars.next() else {
            return Ok(None);
        };
        Ok(Some(match c {
            '=' => Token::Equals,
            ';' => Token::Semicolon,
            '"' => {
                let mut value = String::new();
                loop {
                    match self.chars.next() {
                        Some('"') => break,
                        Some('\\') => match self.chars.next() {
                            Some(escaped) => value.push(escaped),
                            None => {
                                return Err("Unterminated quoted value in JAAS config".to_owned())
                            }
                        },
                        Some(other) => value.push(other),
                        None => return Err("Unterminated quoted value in JAAS config".to_owned()),
                    }
                }
                Token::Quoted(value)
            }
            first => {
                let mut word = String::from(first);
                while let Some(c) = self
                    .chars
                    .next_if(|c| !c.is_whitespace() && !matches!(c, '=' | ';' | '"'))
                {
                    word.push(c);
                }
                Token::Word(word)
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_plain_example_parses_with_its_users() {
        let entry = parse_jaas(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#,
        )
        .expect("valid");
        assert_eq!(
            entry.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(entry.options["user_alice"], "alice-secret");
        assert_eq!(entry.options["username"], "admin");
        assert!(!format!("{entry:?}").contains("secret"));
    }

    #[test]
    fn a_bare_scram_module_has_no_options_and_escapes_are_read() {
        let entry = parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;")
            .expect("valid");
        assert!(entry.options.is_empty());
        let entry = parse_jaas(r#"M required a="x\"y" b=plain;"#).expect("valid");
        assert_eq!(entry.options["a"], "x\"y");
        assert_eq!(entry.options["b"], "plain");
    }

    #[test]
    fn malformed_entries_are_refused_without_showing_values() {
        assert!(parse_jaas("").is_err());
        assert!(parse_jaas("M required a=\"secret\"").is_err());
        assert!(parse_jaas("M maybe;").is_err());
        assert!(parse_jaas("M required; N required;").is_err());
        let e = parse_jaas("M required a=\"secret").expect_err("unterminated");
        assert!(!e.contains("secret"));
    }
}
