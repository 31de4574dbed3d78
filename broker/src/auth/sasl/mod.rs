//! SASL authentication of one connection on a `SASL_*` listener, as Kafka's
//! `SaslServerAuthenticator` runs it. The connection loop asks [`SaslSession::admit`]
//! about every frame before dispatch; the session answers what belongs to authentication
//! itself and says when to close. It sees frames only, never the socket, so the same
//! session runs over TCP and (once Brook has it) TLS.
//!
//! The states:
//! - before authentication, only ApiVersions (dispatched as usual) and SaslHandshake
//!   (v0/v1) are accepted; anything else closes the connection at once, without an
//!   answer (Kafka: `InvalidRequestException` "Unexpected Kafka request of type … during
//!   SASL handshake"). Frames are capped at `sasl.server.max.receive.size`.
//! - after SaslHandshake, the mechanism's tokens: in SaslAuthenticate requests (handshake
//!   v1) or as raw size-prefixed tokens (handshake v0, very old clients).
//! - a failure (unknown mechanism, bad credentials) waits
//!   `connection.failed.authentication.delay.ms`, sends its answer
//!   (UNSUPPORTED_SASL_MECHANISM with the enabled list, SASL_AUTHENTICATION_FAILED with a
//!   message) and closes: clients report an authentication error, not a broken connection.
//! - authenticated: every frame is dispatched, with [`SaslSession::principal`]
//!   `User:<name>`. KIP-368: with `connections.max.reauth.ms`, SaslAuthenticate v1+ tells
//!   the client its session lifetime; a client that speaks v1+ re-authenticates by sending
//!   SaslHandshake again on the same connection (same mechanism and user), even after
//!   expiry (at most once a second); any other request after expiry closes the connection.
//!   An OAUTHBEARER session also ends when its token expires (`exp`), as in Kafka.
//!
//! Secrets never reach a log line: the session logs outcomes and user names only.

pub mod credentials;
pub mod oauthbearer;
pub mod oauthbearer_jwks;
pub mod oauthbearer_signed;
pub mod oauthbearer_token;
pub mod oauthbearer_unsecured;
pub mod plain;
pub mod scram;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use brook_protocol::kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use brook_protocol::kafka_protocol::ResponseError;
use brook_protocol::{decode_request, encode_response, Decoded};
use bytes::{BufMut, Bytes, BytesMut};
use tracing::debug;

use crate::config::sasl::{SaslListener, SaslMechanism, SaslSettings};
use crate::metrics;
use oauthbearer::OAuthBearerServer;
use scram::{ScramCredential, ScramServer};

/// Why a login failed. Kafka shows the client a `SaslAuthenticationException`'s own
/// message, and for any other failure of the mechanism one generic message that does
/// not say whether the user exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    InvalidCredentials,
    Message(String),
}

/// Where SCRAM credentials come from (the metadata image, in the broker).
pub trait ScramCredentials {
    fn scram_credential(&self, user: &str, mechanism: SaslMechanism) -> Option<ScramCredential>;
}

/// What the connection does with a frame.
#[derive(Debug)]
pub enum Admit {
    /// Serve it as any request.
    Dispatch(Bytes),
    /// Write this frame (the authenticator's own answer) and read on.
    Reply(Bytes),
    /// Authentication failed: wait `delay`, write `reply` if there is one, close.
    Fail {
        reply: Option<Bytes>,
        delay: Duration,
        reason: String,
    },
    /// Close now, without an answer.
    Close(String),
}

enum Exchange {
    Plain,
    Scram(Box<ScramServer>),
    OAuthBearer(OAuthBearerServer),
}

enum State {
    /// ApiVersions or SaslHandshake expected.
    Handshake,
    /// The mechanism's tokens expected: in SaslAuthenticate (`framed`) or raw.
    Authenticate {
        mechanism: SaslMechanism,
        exchange: Exchange,
        framed: bool,
    },
    Authenticated,
}

/// One connection's authentication.
pub struct SaslSession {
    listener: Arc<SaslListener>,
    max_receive_size: usize,
    failure_delay: Duration,
    state: State,
    /// The authenticated user (the principal is `User:<name>`); kept across re-authentication.
    user: Option<String>,
    mechanism: Option<SaslMechanism>,
    expires_at: Option<Instant>,
    /// The client sent SaslAuthenticate v1+, so it knows to re-authenticate (KIP-368).
    supports_reauth: bool,
    /// When the last re-authentication began: Kafka allows one per second.
    last_reauth_start: Option<Instant>,
}

/// Kafka's `MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`: a SaslHandshake sooner than this after
/// the previous re-authentication began is served as an ordinary request (ILLEGAL_SASL_STATE).
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

impl SaslSession {
    /// The session for a connection on `listener`, or `None` when it is not a SASL listener.
    pub fn for_listener(settings: &SaslSettings, listener: &str) -> Option<SaslSession> {
        let config = settings.listeners.get(listener)?;
        Some(SaslSession {
            listener: config.clone(),
            max_receive_size: settings.max_receive_size,
            failure_delay: Duration::from_millis(settings.failed_authentication_delay_ms),
            state: State::Handshake,
            user: None,
            mechanism: None,
            expires_at: None,
            supports_reauth: false,
            last_reauth_start: None,
        })
    }

    /// The principal, once authenticated: `User:<name>`.
    pub fn principal(&self) -> Option<String> {
        match self.state {
            State::Authenticated => self.user.as_ref().map(|u| format!("User:{u}")),
            _ => None,
        }
    }

    /// The authenticated user's name (the principal is `User:<name>`), once authenticated.
    pub fn user(&self) -> Option<&str> {
        match self.state {
            State::Authenticated => self.user.as_deref(),
            _ => None,
        }
    }

    /// The largest frame to accept next: `sasl.server.max.receive.size` until
    /// authenticated (and while re-authenticating), `normal` afterwards.
    pub fn max_frame(&self, normal: usize) -> usize {
        match self.state {
            State::Authenticated => normal,
            _ => self.max_receive_size.min(normal),
        }
    }

    /// Decides what to do with a frame that just arrived.
    pub fn admit(
        &mut self,
        frame: Bytes,
        credentials: &dyn ScramCredentials,
        now: Instant,
    ) -> Admit {
        let api_key = frame
            .get(..2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .and_then(|k| ApiKey::try_from(k).ok());
        match &self.state {
            State::Authenticated => {
                // Kafka's SocketServer offers a SaslHandshake to re-authentication before it
                // checks expiry: a client whose re-authentication was due while a long poll
                // was in flight sends its handshake after the session ended, and is renewed.
                if api_key == Some(ApiKey::SaslHandshake) && self.may_reauthenticate(now) {
                    self.last_reauth_start = Some(now);
                    return self.handshake(frame, true);
                }
                if self.expires_at.is_some_and(|at| now >= at) {
                    return Admit::Close("SASL session expired (connections.max.reauth.ms) without re-authentication".to_owned());
                }
                Admit::Dispatch(frame)
            }
            State::Handshake => match api_key {
                Some(ApiKey::ApiVersions) if self.user.is_none() => Admit::Dispatch(frame),
                Some(ApiKey::SaslHandshake) => self.handshake(frame, false),
                other => Admit::Close(format!(
                    "unexpected Kafka request of type {} during SASL handshake",
                    other.map_or_else(|| "unknown".to_owned(), |k| format!("{k:?}"))
                )),
            },
            State::Authenticate { framed: true, .. } => {
                self.authenticate_framed(frame, credentials, now)
            }
            State::Authenticate { framed: false, .. } => {
                match self.evaluate(&frame, credentials, now) {
                    Ok((token, _lifetime)) => Admit::Reply(raw_frame(&token)),
                    Err(failure) => self.fail(None, failure),
                }
            }
        }
    }

    /// Whether a SaslHandshake now starts a re-authentication (KIP-368): the session has a
    /// lifetime, the client speaks SaslAuthenticate v1+, and the last one began ≥ 1 s ago.
    fn may_reauthenticate(&self, now: Instant) -> bool {
        self.supports_reauth
            && self.expires_at.is_some()
            && self
                .last_reauth_start
                .is_none_or(|at| now.saturating_duration_since(at) >= MIN_REAUTH_INTERVAL)
    }

    fn handshake(&mut self, frame: Bytes, reauth: bool) -> Admit {
        let request = match decode_request(frame) {
            Ok(Decoded::Request(request)) => request,
            Ok(Decoded::UnsupportedVersion { .. }) => {
                return Admit::Close("SaslHandshake at a version Brook cannot decode".to_owned())
            }
            Err(e) => return Admit::Close(e.to_string()),
        };
        let RequestKind::SaslHandshake(body) = &request.body else {
            return Admit::Close("not a SaslHandshake".to_owned());
        };
        let version = request.header.request_api_version;
        let enabled: Vec<StrBytes> = self
            .listener
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let asked = body.mechanism.to_string();
        let chosen =
            SaslMechanism::from_name(&asked).filter(|m| self.listener.mechanisms.contains(m));
        let respond = |code: i16| {
            encode_response(
                ApiKey::SaslHandshake,
                version,
                request.header.correlation_id,
                &ResponseKind::SaslHandshake(
                    SaslHandshakeResponse::default()
                        .with_error_code(code)
                        .with_mechanisms(enabled.clone()),
                ),
            )
        };
        let Some(mechanism) = chosen else {
            debug!(mechanism = %asked, "SASL mechanism requested by client is not enabled");
            let reply = respond(ResponseError::UnsupportedSaslMechanism.code()).ok();
            return self.fail(
                reply,
                Failure::Message(format!("Unsupported SASL mechanism {asked}")),
            );
        };
        if reauth && self.mechanism != Some(mechanism) {
            let previous = self.mechanism.map_or("none", SaslMechanism::name);
            return self.fail(None, Failure::Message(format!(
                "SASL mechanism '{asked}' requested by client is not supported for re-authentication of mechanism '{previous}'"
            )));
        }
        let exchange = match mechanism {
            SaslMechanism::Plain => Exchange::Plain,
            SaslMechanism::OAuthBearer => Exchange::OAuthBearer(OAuthBearerServer::default()),
            scram @ (SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512) => {
                Exchange::Scram(Box::new(ScramServer::new(scram)))
            }
        };
        self.state = State::Authenticate {
            mechanism,
            exchange,
            framed: version >= 1,
        };
        match respond(0) {
            Ok(reply) => Admit::Reply(reply),
            Err(e) => Admit::Close(e.to_string()),
        }
    }

    fn authenticate_framed(
        &mut self,
        frame: Bytes,
        credentials: &dyn ScramCredentials,
        now: Instant,
    ) -> Admit {
        let request = match decode_request(frame) {
            Ok(Decoded::Request(request)) => request,
            Ok(Decoded::UnsupportedVersion { .. }) => {
                return Admit::Close(
                    "a request Brook cannot decode during SASL authentication".to_owned(),
                )
            }
            Err(e) => return Admit::Close(e.to_string()),
        };
        let version = request.header.request_api_version;
        let correlation_id = request.header.correlation_id;
        let RequestKind::SaslAuthenticate(body) = request.body else {
            // Kafka answers with the request's own error response (ILLEGAL_SASL_STATE)
            // where it has one; Brook closes, which clients report the same way.
            return self.fail(
                None,
                Failure::Message(format!(
                    "Unexpected Kafka request of type {:?} during SASL authentication.",
                    request.api_key
                )),
            );
        };
        if version > 0 {
            self.supports_reauth = true;
        }
        let respond = |response: SaslAuthenticateResponse| {
            encode_response(
                ApiKey::SaslAuthenticate,
                version,
                correlation_id,
                &ResponseKind::SaslAuthenticate(response),
            )
        };
        match self.evaluate(&body.auth_bytes, credentials, now) {
            Ok((token, lifetime_ms)) => {
                let response = SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(token))
                    .with_session_lifetime_ms(lifetime_ms);
                match respond(response) {
                    Ok(reply) => Admit::Reply(reply),
                    Err(e) => Admit::Close(e.to_string()),
                }
            }
            Err(failure) => {
                let message = self.failure_message(&failure);
                let reply = respond(
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                )
                .ok();
                self.fail(reply, failure)
            }
        }
    }

    /// Runs the mechanism on one client token: the token to send back and the session
    /// lifetime to announce (0 until complete, or when the session never expires).
    fn evaluate(
        &mut self,
        token: &[u8],
        credentials: &dyn ScramCredentials,
        now: Instant,
    ) -> Result<(Vec<u8>, i64), Failure> {
        let State::Authenticate {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            return Err(Failure::InvalidCredentials);
        };
        let mechanism = *mechanism;
        let now_ms = wall_clock_ms();
        // The credential's own expiry (a token's `exp`), in ms since the epoch.
        let mut credential_expires_at_ms = None;
        let (reply, user) = match exchange {
            Exchange::Plain => (
                Vec::new(),
                plain::authenticate(token, &self.listener.plain_users)?,
            ),
            Exchange::Scram(server) => {
                match server.step(token, |user| credentials.scram_credential(user, mechanism))? {
                    scram::Step::Challenge(challenge) => return Ok((challenge, 0)),
                    scram::Step::Complete { reply, user } => (reply, user),
                }
            }
            Exchange::OAuthBearer(server) => {
                let Some(validator) = self.listener.oauthbearer.as_ref() else {
                    return Err(Failure::InvalidCredentials);
                };
                match server.step(token, validator, now_ms)? {
                    oauthbearer::Step::Challenge(challenge) => return Ok((challenge, 0)),
                    oauthbearer::Step::Complete {
                        user,
                        expires_at_ms,
                    } => {
                        credential_expires_at_ms = Some(expires_at_ms);
                        (Vec::new(), user)
                    }
                }
            }
        };
        if let Some(previous) = self.user.as_deref().filter(|p| *p != user) {
            return Err(Failure::Message(format!(
                "Cannot change principals during re-authentication from User.{previous}: User.{user}"
            )));
        }
        let reauthenticated = self.user.is_some();
        let lifetime_ms = session_lifetime_ms(
            credential_expires_at_ms,
            self.listener.connections_max_reauth_ms,
            now_ms,
        );
        self.expires_at = lifetime_ms.map(|ms| now + Duration::from_millis(ms));
        let lifetime_ms = lifetime_ms.unwrap_or(0);
        self.mechanism = Some(mechanism);
        if reauthenticated {
            debug!(user = %user, mechanism = mechanism.name(), "SASL re-authentication succeeded");
            metrics::sasl::record_authentication("reauthentication");
        } else {
            debug!(user = %user, mechanism = mechanism.name(), "SASL authentication succeeded");
            metrics::sasl::record_authentication("success");
        }
        self.user = Some(user);
        self.state = State::Authenticated;
        Ok((reply, i64::try_from(lifetime_ms).unwrap_or(i64::MAX)))
    }

    fn failure_message(&self, failure: &Failure) -> String {
        match failure {
            Failure::Message(message) => message.clone(),
            Failure::InvalidCredentials => {
                let what = if self.user.is_some() {
                    "re-authentication"
                } else {
                    "authentication"
                };
                let mechanism = match &self.state {
                    State::Authenticate { mechanism, .. } => mechanism.name(),
                    _ => "",
                };
                format!("Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}")
            }
        }
    }

    fn fail(&mut self, reply: Option<Bytes>, failure: Failure) -> Admit {
        let reason = self.failure_message(&failure);
        metrics::sasl::record_authentication("failure");
        self.state = State::Handshake;
        self.user = None;
        Admit::Fail {
            reply,
            delay: self.failure_delay,
            reason,
        }
    }
}

/// The session's lifetime as Kafka's `SaslServerAuthenticator` computes it (KIP-368): the
/// time left until the credential expires (a token's `exp`), capped by
/// `connections.max.reauth.ms`; `None` when neither applies (the session never ends).
pub fn session_lifetime_ms(
    credential_expires_at_ms: Option<i64>,
    connections_max_reauth_ms: Option<u64>,
    now_ms: i64,
) -> Option<u64> {
    let until_expiry =
        credential_expires_at_ms.map(|at| u64::try_from(at.saturating_sub(now_ms)).unwrap_or(0));
    match (until_expiry, connections_max_reauth_ms) {
        (Some(left), Some(max)) => Some(left.min(max)),
        (left, max) => left.or(max),
    }
}

/// Milliseconds since the epoch (a token's claims are wall-clock times).
fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A raw SASL token (handshake v0) as a size-prefixed frame.
fn raw_frame(token: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + token.len());
    out.put_u32(u32::try_from(token.len()).unwrap_or(u32::MAX));
    out.put_slice(token);
    out.freeze()
}

#[cfg(test)]
mod oauthbearer_tests;
#[cfg(test)]
mod tests;
