//! Signed JWTs (KIP-768), checked as Kafka's `OAuthBearerValidatorCallbackHandler` checks
//! them through jose4j (`BrokerJwtValidator`): a signature by a key of the configured JWKS
//! (`alg: none` refused); `exp` and `iat` required; expired when now minus
//! `sasl.oauthbearer.clock.skew.seconds` is on or after `exp`; not yet valid when now plus
//! the skew is before `nbf`; `iss` equal to `sasl.oauthbearer.expected.issuer` when set;
//! `aud` holding one of `sasl.oauthbearer.expected.audience` when set, and (jose4j's
//! default) no `aud` at all when it is not; the principal from
//! `sasl.oauthbearer.sub.claim.name`, a non-blank string; the scope claim, when present,
//! a string or a list of strings. Pure.

use serde_json::Value;

use super::oauthbearer_jwks::JwkSet;
use super::oauthbearer_token::{seconds_to_ms, Jwt, TokenError, ValidToken};

/// The signed-token validator of one listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedValidator {
    pub keys: JwkSet,
    /// `sasl.oauthbearer.expected.audience`; empty: a token must carry no `aud`.
    pub expected_audience: Vec<String>,
    pub expected_issuer: Option<String>,
    pub sub_claim: String,
    pub scope_claim: String,
    pub clock_skew_seconds: i64,
}

impl SignedValidator {
    /// Checks `token` at `now_ms` (milliseconds since the epoch).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
        let token = token.trim();
        if token.split('.').count() != 3 {
            return Err(TokenError::new(
                "Malformed JWT provided; expected three sections (header, payload, and signature)",
            ));
        }
        let jwt = Jwt::parse(token)?;
        let alg = match jwt.algorithm() {
            Some("none") | None => {
                return Err(TokenError::new(
                    "'none' is not a permitted algorithm: the token must be signed",
                ))
            }
            Some(alg) => alg,
        };
        let kid = jwt.header.get("kid").and_then(Value::as_str);
        self.keys
            .verify(alg, kid, jwt.signing_input.as_bytes(), jwt.signature)?;

        let now_s = now_ms.div_euclid(1000);
        let skew = self.clock_skew_seconds;
        let exp = whole_seconds(&jwt, "exp")?
            .ok_or_else(|| TokenError::new("No Expiration Time (exp) claim present."))?;
        if now_s.saturating_sub(skew) >= exp {
            return Err(TokenError::new(format!(
                "The JWT is no longer valid - the evaluation time {now_s} is on or after the Expiration Time (exp={exp}) claim value (even when providing {skew} seconds of leeway to account for clock skew)."
            )));
        }
        let iat = whole_seconds(&jwt, "iat")?
            .ok_or_else(|| TokenError::new("No Issued At (iat) claim present."))?;
        if let Some(nbf) =
            whole_seconds(&jwt, "nbf")?.filter(|nbf| now_s.saturating_add(skew) < *nbf)
        {
            return Err(TokenError::new(format!(
                "The JWT is not yet valid as the evaluation time {now_s} is before the Not Before (nbf={nbf}) claim time (even when providing {skew} seconds of leeway to account for clock skew)."
            )));
        }
        self.check_issuer(&jwt)?;
        self.check_audience(&jwt)?;
        jwt.scope(&self.scope_claim)?;
        let principal = jwt
            .string_claim(&self.sub_claim)
            .map_err(|_| {
                TokenError::new(format!(
                    "Could not extract the '{}' claim from the access token",
                    self.sub_claim
                ))
            })?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenError::new(format!("{} value must be non-empty", self.sub_claim)))?
            .to_owned();
        if exp < 0 || iat < 0 {
            return Err(TokenError::new("exp and iat values must be non-negative"));
        }
        Ok(ValidToken {
            principal,
            expires_at_ms: exp.saturating_mul(1000),
        })
    }

    fn check_issuer(&self, jwt: &Jwt<'_>) -> Result<(), TokenError> {
        let Some(expected) = &self.expected_issuer else {
            return Ok(());
        };
        match jwt.string_claim("iss")? {
            None => Err(TokenError::new(format!(
                "No Issuer (iss) claim present but was expecting {expected}"
            ))),
            Some(iss) if iss == expected => Ok(()),
            Some(iss) => Err(TokenError::new(format!(
                "Issuer (iss) claim value ({iss}) doesn't match expected value of {expected}"
            ))),
        }
    }

    fn check_audience(&self, jwt: &Jwt<'_>) -> Result<(), TokenError> {
        let audiences: Vec<&str> = match jwt.claims.get("aud") {
            None | Some(Value::Null) => {
                return if self.expected_audience.is_empty() {
                    Ok(())
                } else {
                    Err(TokenError::new("No Audience (aud) claim present."))
                }
            }
            Some(Value::String(aud)) => vec![aud.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(TokenError::new(
                "The value of the 'aud' claim is not an array of strings or a single string value.",
            )),
        };
        if audiences
            .iter()
            .any(|aud| self.expected_audience.iter().any(|e| e == aud))
        {
            return Ok(());
        }
        Err(TokenError::new(if self.expected_audience.is_empty() {
            format!("Audience (aud) claim {audiences:?} present in the JWT but no expected audience value(s) were provided to the JWT Consumer.")
        } else {
            format!(
                "Audience (aud) claim {audiences:?} doesn't contain an acceptable identifier. Expected {:?} as an aud value.",
                self.expected_audience
            )
        }))
    }
}

/// A NumericDate claim in whole seconds (jose4j truncates fractions).
fn whole_seconds(jwt: &Jwt<'_>, name: &str) -> Result<Option<i64>, TokenError> {
    Ok(jwt
        .number_claim(name)?
        .map(|seconds| seconds_to_ms(seconds.trunc()) / 1000))
}
