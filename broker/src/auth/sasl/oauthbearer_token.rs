//! A JWT in compact serialization (RFC 7515 / 7519), read as both of Kafka's OAUTHBEARER
//! validators read it: three dot-separated Base64URL parts (header, claims, signature),
//! header and claims JSON objects. What the claims mean is the validators' business
//! ([`super::oauthbearer_unsecured`], [`super::oauthbearer_signed`]); this file only
//! splits, decodes and offers typed claim accessors and the scope rules both share. Pure.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

/// Why a token was refused: the validator's own words, for the broker's log only (the
/// client is told just `invalid_token` or `insufficient_scope`, as Kafka tells it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    pub reason: String,
    /// For a missing required scope: the scope the client needs (Kafka's `failureScope`).
    pub scope: Option<String>,
}

impl TokenError {
    pub fn new(reason: impl Into<String>) -> TokenError {
        TokenError {
            reason: reason.into(),
            scope: None,
        }
    }
}

/// A token that passed its validator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The principal's name (the principal is `User:<name>`).
    pub principal: String,
    /// `exp` in milliseconds since the epoch: when the session must end (KIP-368).
    pub expires_at_ms: i64,
}

/// A decoded compact JWS.
#[derive(Debug)]
pub struct Jwt<'a> {
    pub header: Map<String, Value>,
    pub claims: Map<String, Value>,
    /// `header.claims` as sent: what the signature covers.
    pub signing_input: &'a str,
    /// The third part, still Base64URL-encoded (empty for an unsecured JWS).
    pub signature: &'a str,
}

impl<'a> Jwt<'a> {
    /// Splits and decodes `token`.
    pub fn parse(token: &'a str) -> Result<Jwt<'a>, TokenError> {
        if token.contains("..") {
            return Err(TokenError::new(
                "Malformed compact serialization contains '..'",
            ));
        }
        let mut parts = token.splitn(4, '.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::new(
                "JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
            ));
        };
        // `header.claims`: a prefix of `token`, so always in bounds.
        let signing_input = token
            .get(..header.len() + 1 + claims.len())
            .unwrap_or_default();
        Ok(Jwt {
            header: json_object(header)?,
            claims: json_object(claims)?,
            signing_input,
            signature,
        })
    }

    /// The header's `alg`, if it is a string.
    pub fn algorithm(&self) -> Option<&str> {
        self.header.get("alg").and_then(Value::as_str)
    }

    /// A numeric claim: `None` when absent, an error when not a number.
    pub fn number_claim(&self, name: &str) -> Result<Option<f64>, TokenError> {
        match self.claims.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(TokenError::new(format!(
                "The '{name}' claim was not of type Number: {}",
                json_type(other)
            ))),
        }
    }

    /// A string claim: `None` when absent, an error when not a string.
    pub fn string_claim(&self, name: &str) -> Result<Option<&str>, TokenError> {
        match self.claims.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(TokenError::new(format!(
                "The '{name}' claim was not of type String: {}",
                json_type(other)
            ))),
        }
    }

    /// The scope claim as a set of items: a string is one item, a list its non-blank
    /// elements, each trimmed (both of Kafka's validators read it so).
    pub fn scope(&self, name: &str) -> Result<Vec<String>, TokenError> {
        let mut scope: Vec<String> = match self.claims.get(name) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.trim().to_owned()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => s.trim().to_owned(),
                    other => other.to_string(),
                })
                .collect(),
            Some(other) => {
                return Err(TokenError::new(format!(
                    "The '{name}' claim was not of type List: {}",
                    json_type(other)
                )))
            }
        };
        scope.retain(|item| !item.is_empty());
        scope.sort_unstable();
        scope.dedup();
        Ok(scope)
    }
}

/// Base64URL without padding (RFC 7515), leniently: padding and the standard alphabet are
/// accepted too, as Java's decoders accept one or the other.
pub fn decode_base64url(text: &str) -> Option<Vec<u8>> {
    let normalized: String = text
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            other => other,
        })
        .collect();
    URL_SAFE_NO_PAD.decode(normalized).ok()
}

fn json_object(part: &str) -> Result<Map<String, Value>, TokenError> {
    let bytes = decode_base64url(part)
        .ok_or_else(|| TokenError::new("malformed Base64 URL encoded value"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(TokenError::new("malformed JSON")),
    }
}

/// Java's simple class name for a JSON value, as Kafka's messages say it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "Boolean",
        Value::Number(_) => "Number",
        Value::String(_) => "String",
        Value::Array(_) => "List",
        Value::Object(_) => "Map",
    }
}

/// Whether `item` is a scope token as RFC 6749 section 3.3 defines it (Kafka's
/// `OAuthBearerScopeUtils.isValidScopeItem`): printable ASCII but space, `"` and `\`.
pub fn is_valid_scope_item(item: &str) -> bool {
    !item.is_empty()
        && item
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b))
}

/// Java's `List.toString` of `items` (`[a, b]`): Kafka's words for a required scope.
pub fn java_list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// Seconds (possibly fractional) to milliseconds, rounded as Java's `Math.round`.
pub fn seconds_to_ms(seconds: f64) -> i64 {
    // `as` saturates on overflow and maps NaN to 0: a nonsense claim cannot wrap around.
    (seconds * 1000.0).round() as i64
}
