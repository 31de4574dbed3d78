//! Unsecured JWS tokens (KIP-255), checked as Kafka's default OAUTHBEARER server callback
//! handler (`OAuthBearerUnsecuredValidatorCallbackHandler`) checks them: `alg` must be
//! `none` and the signature empty; `exp` is required and must be after now minus the
//! allowed clock skew; `iat`, when present, must not be after now plus the skew, and
//! before `exp`; the principal claim (default `sub`) must be a non-blank string; every
//! required scope item must be in the scope claim. For development only: anyone can
//! write such a token. The options come from the listener's JAAS entry
//! (`unsecuredValidator*`). Pure.

use std::collections::BTreeMap;

use super::oauthbearer_token::{
    is_valid_scope_item, java_list, seconds_to_ms, Jwt, TokenError, ValidToken,
};

pub const PRINCIPAL_CLAIM_NAME_OPTION: &str = "unsecuredValidatorPrincipalClaimName";
pub const SCOPE_CLAIM_NAME_OPTION: &str = "unsecuredValidatorScopeClaimName";
pub const REQUIRED_SCOPE_OPTION: &str = "unsecuredValidatorRequiredScope";
pub const ALLOWABLE_CLOCK_SKEW_MILLIS_OPTION: &str = "unsecuredValidatorAllowableClockSkewMs";

/// The unsecured validator's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsecuredValidator {
    pub principal_claim: String,
    pub scope_claim: String,
    pub required_scope: Vec<String>,
    pub allowable_clock_skew_ms: i64,
}

impl Default for UnsecuredValidator {
    fn default() -> Self {
        UnsecuredValidator {
            principal_claim: "sub".to_owned(),
            scope_claim: "scope".to_owned(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
        }
    }
}

impl UnsecuredValidator {
    /// The options of a JAAS entry; the error names the option (Kafka fails the login of
    /// every client on such an option; Brook refuses it at start).
    pub fn from_jaas_options(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let nonblank = |key: &str| options.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mut validator = UnsecuredValidator::default();
        if let Some(name) = nonblank(PRINCIPAL_CLAIM_NAME_OPTION) {
            validator.principal_claim = name.to_owned();
        }
        if let Some(name) = nonblank(SCOPE_CLAIM_NAME_OPTION) {
            validator.scope_claim = name.to_owned();
        }
        if let Some(scope) = nonblank(REQUIRED_SCOPE_OPTION) {
            for item in scope.split(' ').filter(|i| !i.is_empty()) {
                if !is_valid_scope_item(item) {
                    return Err(format!(
                        "{REQUIRED_SCOPE_OPTION}: Invalid scope value: {item}"
                    ));
                }
                validator.required_scope.push(item.to_owned());
            }
        }
        if let Some(skew) = nonblank(ALLOWABLE_CLOCK_SKEW_MILLIS_OPTION) {
            let ms: i32 = skew.parse().map_err(|_| {
                format!("{ALLOWABLE_CLOCK_SKEW_MILLIS_OPTION}: not an integer: {skew}")
            })?;
            if ms < 0 {
                return Err(format!(
                    "{ALLOWABLE_CLOCK_SKEW_MILLIS_OPTION}: Allowable clock skew millis must not be negative: {skew}"
                ));
            }
            validator.allowable_clock_skew_ms = i64::from(ms);
        }
        Ok(validator)
    }

    /// Checks `token` at `now_ms` (milliseconds since the epoch).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
        let jwt = Jwt::parse(token)?;
        match jwt.header.get("alg") {
            None => return Err(TokenError::new("JWS header must have an Algorithm value")),
            Some(alg) if alg.as_str() == Some("none") => {}
            Some(_) => {
                return Err(TokenError::new(
                    "Unsecured JWS must have 'none' for an algorithm",
                ))
            }
        }
        if !jwt.signature.is_empty() {
            return Err(TokenError::new(
                "Unsecured JWS must not contain a digital signature",
            ));
        }
        let scope = jwt.scope(&self.scope_claim)?;
        let exp = jwt
            .number_claim("exp")?
            .ok_or_else(|| TokenError::new("No expiration time in JWT"))?;
        let principal = jwt
            .string_claim(&self.principal_claim)?
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                TokenError::new(format!(
                    "No principal name in JWT claim: {}",
                    self.principal_claim
                ))
            })?
            .to_owned();
        let iat = jwt.number_claim("iat")?;
        let skew = self.allowable_clock_skew_ms;
        if let Some(iat) = iat.filter(|iat| seconds_to_ms(*iat) > now_ms.saturating_add(skew)) {
            return Err(TokenError::new(format!(
                "The Issued At value ({iat:.6} seconds) was after the indicated time ({now_ms} ms) plus allowable clock skew ({skew} ms)"
            )));
        }
        if now_ms.saturating_sub(skew) >= seconds_to_ms(exp) {
            return Err(TokenError::new(format!(
                "The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the Expiration Time value ({exp:.6} seconds)"
            )));
        }
        if let Some(iat) = iat.filter(|iat| exp <= *iat) {
            return Err(TokenError::new(format!(
                "The Expiration Time time ({exp:.6} seconds) was not after the Issued At time ({iat:.6} seconds)"
            )));
        }
        if let Some(missing) = self.required_scope.iter().find(|r| !scope.contains(r)) {
            return Err(TokenError {
                reason: format!(
                    "The provided scope ({}) was missing a required scope ({missing}).  All required scope elements: {}",
                    java_list(&scope),
                    java_list(&self.required_scope)
                ),
                scope: Some(java_list(&self.required_scope)),
            });
        }
        Ok(ValidToken {
            principal,
            expires_at_ms: seconds_to_ms(exp),
        })
    }
}
