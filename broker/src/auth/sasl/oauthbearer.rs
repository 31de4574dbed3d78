//! SASL/OAUTHBEARER (RFC 7628) as Kafka's `OAuthBearerSaslServer` runs it: one client
//! message `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]...\x01`, the token
//! checked by the listener's validator: [`UnsecuredValidator`] (KIP-255, Kafka's default
//! server callback handler) or [`SignedValidator`] (KIP-768, with
//! `sasl.server.callback.handler.class=…OAuthBearerValidatorCallbackHandler`).
//!
//! A refused token is answered, as RFC 7628 says, with a JSON error challenge
//! (`{"status":"invalid_token"}`, or `insufficient_scope` with the scope the unsecured
//! validator requires); the client acknowledges it with a lone `\x01`, and only then does
//! the authentication fail, with that JSON as SASL_AUTHENTICATION_FAILED's message. A
//! message that does not parse fails at once with the mechanism's generic message; an
//! authorization id must equal the token's principal. Extensions are accepted and
//! unused, as both of Kafka's handlers accept them. The principal is `User:<sub>` and the
//! session ends at the token's `exp` (KIP-368, [`super::SaslSession`]). Pure.

use tracing::info;

use super::oauthbearer_signed::SignedValidator;
use super::oauthbearer_token::{TokenError, ValidToken};
use super::oauthbearer_unsecured::UnsecuredValidator;
use super::Failure;

/// How a listener checks OAUTHBEARER tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OAuthBearerValidator {
    Unsecured(UnsecuredValidator),
    Signed(SignedValidator),
}

impl OAuthBearerValidator {
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
        match self {
            OAuthBearerValidator::Unsecured(v) => v.validate(token, now_ms),
            OAuthBearerValidator::Signed(v) => v.validate(token, now_ms),
        }
    }

    /// The JSON error challenge for a refused token, as Kafka spells it.
    pub fn error_challenge(&self, error: &TokenError) -> String {
        match (self, &error.scope) {
            (OAuthBearerValidator::Unsecured(_), Some(scope)) => {
                format!("{{\"status\":\"insufficient_scope\", \"scope\":\"{scope}\"}}")
            }
            _ => "{\"status\":\"invalid_token\"}".to_owned(),
        }
    }
}

/// What one client message leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge (a JSON error) and wait for the client's `\x01`.
    Challenge(Vec<u8>),
    Complete {
        user: String,
        expires_at_ms: i64,
    },
}

/// One OAUTHBEARER exchange.
#[derive(Debug, Default)]
pub struct OAuthBearerServer {
    /// The error challenge sent, until the client acknowledges it.
    pending_error: Option<String>,
}

/// The client's control-A acknowledgement of an error challenge.
const CONTROL_A: u8 = 0x01;

impl OAuthBearerServer {
    pub fn step(
        &mut self,
        response: &[u8],
        validator: &OAuthBearerValidator,
        now_ms: i64,
    ) -> Result<Step, Failure> {
        if response == [CONTROL_A] {
            if let Some(error) = self.pending_error.take() {
                return Err(Failure::Message(error));
            }
        }
        self.pending_error = None;
        // Kafka throws a SaslException here: the client gets the generic message.
        let initial = parse_initial_response(response).ok_or(Failure::InvalidCredentials)?;
        let token = match validator.validate(initial.token, now_ms) {
            Ok(token) => token,
            Err(error) => {
                info!(reason = %error.reason, "OAUTHBEARER token refused");
                let challenge = validator.error_challenge(&error);
                self.pending_error = Some(challenge.clone());
                return Ok(Step::Challenge(challenge.into_bytes()));
            }
        };
        if !initial.authzid.is_empty() && initial.authzid != token.principal {
            return Err(Failure::Message(format!(
                "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                initial.authzid, token.principal
            )));
        }
        Ok(Step::Complete {
            user: token.principal,
            expires_at_ms: token.expires_at_ms,
        })
    }
}

/// The parts of a client's initial response the server uses.
#[derive(Debug, PartialEq, Eq)]
pub struct InitialResponse<'a> {
    pub authzid: &'a str,
    pub token: &'a str,
}

/// Parses `n,[a=authzid],\x01auth=<scheme> <token>\x01[key=value\x01]...\x01` with Kafka's
/// rules (`OAuthBearerClientInitialResponse`): keys are letters, values printable ASCII,
/// space, tab or line breaks; `auth` is required and its scheme is `Bearer` in any case.
pub fn parse_initial_response(message: &[u8]) -> Option<InitialResponse<'_>> {
    let text = std::str::from_utf8(message).ok()?;
    let (authz, rest) = text.strip_prefix("n,")?.split_once(',')?;
    let authzid = if authz.is_empty() {
        ""
    } else {
        let name = authz.strip_prefix("a=")?;
        (!name.is_empty()
            && name
                .bytes()
                .all(|b| (0x01..=0x7F).contains(&b) && b != b'='))
        .then_some(name)?
    };
    let pairs = rest.strip_prefix('\x01')?.strip_suffix('\x01')?;
    let mut auth = None;
    for pair in pairs.strip_suffix('\x01')?.split('\x01') {
        let (key, value) = pair.split_once('=')?;
        let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
        let value_ok = !value.is_empty()
            && value
                .bytes()
                .all(|b| (0x21..=0x7E).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
        if !key_ok || !value_ok {
            return None;
        }
        if key == "auth" {
            auth = Some(value);
        }
    }
    let (scheme, token) = auth?.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let body = token.trim_end_matches('=');
    let token_ok = !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~' | b'+' | b'/' | b'.')
        });
    (scheme_ok && scheme.eq_ignore_ascii_case("bearer") && token_ok)
        .then_some(InitialResponse { authzid, token })
}
