//! The principal of a client that authenticated with a TLS certificate, as Kafka's
//! `DefaultKafkaPrincipalBuilder` builds it: `User:` + the certificate's subject DN in
//! RFC 2253 form (`X500Principal.getName(RFC2253)`: the last RDN first, `CN=…,O=…`), after
//! `ssl.principal.mapping.rules` (Kafka's `SslPrincipalMapper`, KIP-371).
//!
//! Rules: a comma-separated list of `DEFAULT` (the DN unchanged) and
//! `RULE:pattern/replacement/[L|U]`. The first rule whose pattern matches the whole DN
//! gives the name (replacement with `$1`-style groups, then lower or upper case); a DN no
//! rule matches is refused, as Kafka refuses it. Pure functions.

use regex::Regex;

/// One parsed rule.
#[derive(Clone, Debug)]
enum Rule {
    Default,
    Replace {
        /// The pattern anchored at both ends: Java's `Matcher.matches()`.
        whole: Regex,
        pattern: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// `ssl.principal.mapping.rules`, parsed.
#[derive(Clone, Debug)]
pub struct PrincipalMappingRules(Vec<Rule>);

impl PrincipalMappingRules {
    /// Parses the key's value; the error is the reason, for a message naming the key.
    pub fn parse(text: &str) -> Result<PrincipalMappingRules, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    split_unescaped_slash(after).ok_or_else(|| format!("Invalid rule: {rest}"))?;
                let (replacement, after) =
                    split_unescaped_slash(after).ok_or_else(|| format!("Invalid rule: {rest}"))?;
                let (case, after) = match after.chars().next() {
                    Some('L') => (Case::Lower, &after[1..]),
                    Some('U') => (Case::Upper, &after[1..]),
                    _ => (Case::Keep, after),
                };
                let pattern = pattern.replace("\\/", "/");
                let compile = |p: &str| {
                    Regex::new(p).map_err(|e| format!("Invalid rule pattern {pattern}: {e}"))
                };
                rules.push(Rule::Replace {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    pattern: compile(&pattern)?,
                    replacement: java_replacement(&replacement.replace("\\/", "/")),
                    case,
                });
                rest = after;
            } else {
                return Err(format!("Invalid rule: {rest}"));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("Invalid rule: {rest}")),
            }
        }
        Ok(PrincipalMappingRules(rules))
    }

    /// The principal name for `dn`, or `None` when no rule matches (authentication fails).
    pub fn apply(&self, dn: &str) -> Option<String> {
        self.0.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_owned()),
            Rule::Replace {
                whole,
                pattern,
                replacement,
                case,
            } => {
                if !whole.is_match(dn) {
                    return None;
                }
                let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                Some(match case {
                    Case::Keep => name,
                    Case::Lower => name.to_lowercase(),
                    Case::Upper => name.to_uppercase(),
                })
            }
        })
    }
}

/// Splits at the first `/` not preceded by a backslash.
fn split_unescaped_slash(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'/' => return Some((&text[..i], &text[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

/// Java's `$1` group references as the regex crate spells them unambiguously (`${1}`).
fn java_replacement(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("${");
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                out.push(d);
                chars.next();
            }
            out.push('}');
        } else if c == '$' {
            out.push_str("$$");
        } else {
            out.push(c);
        }
    }
    out
}

/// The subject DN of a DER certificate in RFC 2253 form, `None` if it does not parse.
///
/// Read with a small DER walker rather than a certificate crate: rustls has already verified
/// the certificate, only the subject's attribute types and values are needed, and the usual
/// crates' derive macros would change the features of crates RocksDB's build shares.
pub fn subject_dn_rfc2253(der: &[u8]) -> Option<String> {
    let (certificate, _) = der_element(der, SEQUENCE)?;
    let (tbs, _) = der_element(certificate, SEQUENCE)?;
    let mut rest = tbs;
    // tbsCertificate: [0] version (optional), serialNumber, signature, issuer, validity, subject.
    if rest.first() == Some(&VERSION_TAG) {
        rest = der_any(rest)?.1;
    }
    for _ in 0..4 {
        rest = der_any(rest)?.1;
    }
    let (mut name, _) = der_element(rest, SEQUENCE)?;
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (mut set, after) = der_element(name, SET)?;
        name = after;
        let mut attributes = Vec::new();
        while !set.is_empty() {
            let (attribute, after) = der_element(set, SEQUENCE)?;
            set = after;
            let (oid, value) = der_element(attribute, OID)?;
            let (tag, content, _) = der_tlv(value)?;
            let text = match string_value(tag, content) {
                Some(text) => escape_rfc2253(&text),
                None => format!("#{}", hex(value)),
            };
            attributes.push(format!("{}={text}", keyword(&oid_text(oid)?)));
        }
        rdns.push(attributes.join("+"));
    }
    // RFC 2253 writes the most specific RDN (the last in the certificate) first.
    Some(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const VERSION_TAG: u8 = 0xa0;

/// One DER element: (tag, content, what follows).
fn der_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let bytes = input.get(2..2 + count)?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, 2 + count)
    };
    let content = input.get(header..header.checked_add(len)?)?;
    let rest = input.get(header + len..)?;
    Some((tag, content, rest))
}

/// The content of an element with tag `tag`, and what follows it.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, content, rest) = der_tlv(input)?;
    (found == tag).then_some((content, rest))
}

/// Skips one element of any tag.
fn der_any(input: &[u8]) -> Option<(&[u8], &[u8])> {
    der_tlv(input).map(|(_, content, rest)| (content, rest))
}

/// The text of a directory string (UTF8, Printable, IA5, Teletex as Latin-1, BMP), `None`
/// for other types (written as `#` + hex, as Java does).
fn string_value(tag: u8, content: &[u8]) -> Option<String> {
    match tag {
        0x0c | 0x13 | 0x16 => String::from_utf8(content.to_vec()).ok(),
        0x14 => Some(content.iter().map(|b| char::from(*b)).collect()),
        0x1e => {
            let units: Vec<u16> = content
                .chunks_exact(2)
                .map(|p| u16::from_be_bytes([p[0], p[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// An OID's dotted form.
fn oid_text(content: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for byte in content {
        value = value.checked_mul(128)? | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

/// The RFC 2253 keyword of an attribute type, or its dotted OID (as Java prints it).
fn keyword(oid: &str) -> String {
    match oid {
        "2.5.4.3" => "CN".to_owned(),
        "2.5.4.6" => "C".to_owned(),
        "2.5.4.7" => "L".to_owned(),
        "2.5.4.8" => "ST".to_owned(),
        "2.5.4.9" => "STREET".to_owned(),
        "2.5.4.10" => "O".to_owned(),
        "2.5.4.11" => "OU".to_owned(),
        "0.9.2342.19200300.100.1.25" => "DC".to_owned(),
        "0.9.2342.19200300.100.1.1" => "UID".to_owned(),
        other => other.to_owned(),
    }
}

/// RFC 2253 section 2.4 escaping.
fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> PrincipalMappingRules {
        PrincipalMappingRules::parse(text).expect("valid rules")
    }

    #[test]
    fn default_keeps_the_dn() {
        assert_eq!(
            rules("DEFAULT").apply("CN=a,O=b").as_deref(),
            Some("CN=a,O=b")
        );
    }

    #[test]
    fn kafka_documented_rules_map_names() {
        // Kafka's documentation examples (security.html, "Customizing SSL User Name").
        let r = rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT");
        assert_eq!(
            r.apply("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("serviceuser")
        );
        assert_eq!(
            r.apply("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("adminuser@admin")
        );
        assert_eq!(r.apply("CN=Client.One,O=x").as_deref(), Some("client.one"));
    }

    #[test]
    fn a_dn_no_rule_matches_is_refused() {
        assert_eq!(rules("RULE:^CN=(.*)$/$1/").apply("O=x"), None);
    }

    #[test]
    fn malformed_rules_are_refused() {
        assert!(PrincipalMappingRules::parse("RULE:abc").is_err());
        assert!(PrincipalMappingRules::parse("NOPE").is_err());
        assert!(PrincipalMappingRules::parse("RULE:(/x/").is_err());
    }

    #[test]
    fn a_certificates_subject_is_written_most_specific_rdn_first() {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::CertificateDer;
        // Made by scripts/certs.sh with subject /O=Brook/OU=clients/CN=brook-client.
        let cert = CertificateDer::from_pem_slice(include_bytes!("testdata/client.pem"))
            .expect("a PEM certificate");
        assert_eq!(
            subject_dn_rfc2253(cert.as_ref()).as_deref(),
            Some("CN=brook-client,OU=clients,O=Brook")
        );
    }

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(escape_rfc2253("a,b"), "a\\,b");
        assert_eq!(escape_rfc2253(" x "), "\\ x\\ ");
    }
}
