use std::collections::BTreeMap;

use brook_protocol::kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use brook_protocol::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use bytes::Buf;

use super::*;
use crate::config::sasl::tests_support::users;

struct NoScram;

impl ScramCredentials for NoScram {
    fn scram_credential(&self, _: &str, _: SaslMechanism) -> Option<ScramCredential> {
        None
    }
}

fn session(reauth_ms: Option<u64>) -> SaslSession {
    let listener = SaslListener {
        mechanisms: vec![SaslMechanism::Plain, SaslMechanism::ScramSha512],
        plain_users: users(&[("alice", "alice-secret"), ("bob", "bob-secret")]),
        connections_max_reauth_ms: reauth_ms,
        oauthbearer: None,
    };
    let settings = SaslSettings {
        listeners: BTreeMap::from([("SASL_PLAINTEXT".to_owned(), Arc::new(listener))]),
        max_receive_size: 524_288,
        failed_authentication_delay_ms: 100,
    };
    SaslSession::for_listener(&settings, "SASL_PLAINTEXT").expect("a SASL listener")
}

fn frame<T: Encodable + HeaderVersion>(api: ApiKey, version: i16, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7);
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, T::header_version(version))
        .expect("header");
    body.encode(&mut buf, version).expect("body");
    buf.freeze()
}

fn handshake(mechanism: &str, version: i16) -> Bytes {
    frame(
        ApiKey::SaslHandshake,
        version,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())),
    )
}

fn authenticate(token: &[u8]) -> Bytes {
    frame(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token)),
    )
}

fn metadata() -> Bytes {
    frame(ApiKey::Metadata, 12, &MetadataRequest::default())
}

fn handshake_response(mut reply: Bytes) -> SaslHandshakeResponse {
    reply.advance(4);
    ResponseHeader::decode(&mut reply, 0).expect("header");
    SaslHandshakeResponse::decode(&mut reply, 1).expect("body")
}

fn authenticate_response(mut reply: Bytes) -> SaslAuthenticateResponse {
    reply.advance(4);
    ResponseHeader::decode(&mut reply, 1).expect("header");
    SaslAuthenticateResponse::decode(&mut reply, 2).expect("body")
}

fn reply(admit: Admit) -> Bytes {
    match admit {
        Admit::Reply(bytes) => bytes,
        other => panic!("expected a reply, got {other:?}"),
    }
}

/// The refusal's reply and the delay before it goes out.
fn failure(admit: Admit) -> (Bytes, Duration) {
    match admit {
        Admit::Fail {
            reply: Some(reply),
            delay,
            ..
        } => (reply, delay),
        other => panic!("expected a failure with a reply, got {other:?}"),
    }
}

#[test]
fn plain_over_handshake_v1_authenticates_and_then_dispatches() {
    let mut s = session(None);
    let now = Instant::now();
    let api_versions = frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert!(matches!(
        s.admit(api_versions, &NoScram, now),
        Admit::Dispatch(_)
    ));
    let response = handshake_response(reply(s.admit(handshake("PLAIN", 1), &NoScram, now)));
    assert_eq!(response.error_code, 0);
    assert_eq!(response.mechanisms.len(), 2);
    assert_eq!(s.principal(), None);
    let response = authenticate_response(reply(s.admit(
        authenticate(b"\0alice\0alice-secret"),
        &NoScram,
        now,
    )));
    assert_eq!(response.error_code, 0);
    assert_eq!(response.session_lifetime_ms, 0);
    assert_eq!(s.principal().as_deref(), Some("User:alice"));
    assert!(matches!(
        s.admit(metadata(), &NoScram, now),
        Admit::Dispatch(_)
    ));
    assert_eq!(s.max_frame(100 << 20), 100 << 20);
}

#[test]
fn a_request_before_authentication_closes_without_an_answer() {
    let mut s = session(None);
    assert_eq!(s.max_frame(100 << 20), 524_288);
    assert!(matches!(
        s.admit(metadata(), &NoScram, Instant::now()),
        Admit::Close(reason) if reason.contains("Metadata")
    ));
}

#[test]
fn a_wrong_password_fails_with_kafkas_message_after_the_delay() {
    let mut s = session(None);
    let now = Instant::now();
    reply(s.admit(handshake("PLAIN", 1), &NoScram, now));
    let (reply, delay) = failure(s.admit(authenticate(b"\0alice\0wrong"), &NoScram, now));
    assert_eq!(delay, Duration::from_millis(100));
    let response = authenticate_response(reply);
    assert_eq!(response.error_code, 58);
    assert_eq!(
        response.error_message.map(|m| m.to_string()).as_deref(),
        Some("Authentication failed: Invalid username or password")
    );
    assert_eq!(s.principal(), None);
}

#[test]
fn an_unknown_user_of_scram_gets_the_generic_message() {
    let mut s = session(None);
    let now = Instant::now();
    reply(s.admit(handshake("SCRAM-SHA-512", 1), &NoScram, now));
    let (reply, _) = failure(s.admit(authenticate(b"n,,n=carol,r=abc"), &NoScram, now));
    let response = authenticate_response(reply);
    assert_eq!(response.error_code, 58);
    assert_eq!(
        response.error_message.map(|m| m.to_string()).as_deref(),
        Some("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
    );
}

#[test]
fn a_mechanism_not_enabled_is_refused_with_the_enabled_list() {
    let mut s = session(None);
    let (reply, _) = failure(s.admit(handshake("SCRAM-SHA-256", 1), &NoScram, Instant::now()));
    let response = handshake_response(reply);
    assert_eq!(response.error_code, 33);
    let names: Vec<String> = response.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(names, ["PLAIN", "SCRAM-SHA-512"]);
}

#[test]
fn handshake_v0_carries_raw_tokens() {
    let mut s = session(None);
    let now = Instant::now();
    reply(s.admit(handshake("PLAIN", 0), &NoScram, now));
    let raw = reply(s.admit(Bytes::from_static(b"\0bob\0bob-secret"), &NoScram, now));
    assert_eq!(&raw[..], &[0, 0, 0, 0]);
    assert_eq!(s.principal().as_deref(), Some("User:bob"));
}

#[test]
fn a_session_expires_unless_the_client_reauthenticates_as_the_same_user() {
    let mut s = session(Some(3000));
    let start = Instant::now();
    reply(s.admit(handshake("PLAIN", 1), &NoScram, start));
    let response = authenticate_response(reply(s.admit(
        authenticate(b"\0alice\0alice-secret"),
        &NoScram,
        start,
    )));
    assert_eq!(response.session_lifetime_ms, 3000);
    let later = start + Duration::from_millis(2500);
    reply(s.admit(handshake("PLAIN", 1), &NoScram, later));
    reply(s.admit(authenticate(b"\0alice\0alice-secret"), &NoScram, later));
    let after_first_expiry = start + Duration::from_millis(4000);
    assert!(matches!(
        s.admit(metadata(), &NoScram, after_first_expiry),
        Admit::Dispatch(_)
    ));
    let expired = later + Duration::from_millis(3001);
    assert!(matches!(
        s.admit(metadata(), &NoScram, expired),
        Admit::Close(_)
    ));

    let mut s = session(Some(3000));
    reply(s.admit(handshake("PLAIN", 1), &NoScram, start));
    reply(s.admit(authenticate(b"\0alice\0alice-secret"), &NoScram, start));
    reply(s.admit(handshake("PLAIN", 1), &NoScram, start));
    assert!(matches!(
        s.admit(authenticate(b"\0bob\0bob-secret"), &NoScram, start),
        Admit::Fail { reason, .. } if reason.contains("Cannot change principals")
    ));
}

#[test]
fn a_handshake_after_expiry_still_reauthenticates_but_only_once_a_second() {
    let mut s = session(Some(3000));
    let start = Instant::now();
    reply(s.admit(handshake("PLAIN", 1), &NoScram, start));
    reply(s.admit(authenticate(b"\0alice\0alice-secret"), &NoScram, start));
    // Due at ~2.7 s, sent after a long poll that ended past the 3 s lifetime.
    let late = start + Duration::from_millis(3300);
    reply(s.admit(handshake("PLAIN", 1), &NoScram, late));
    let response = authenticate_response(reply(s.admit(
        authenticate(b"\0alice\0alice-secret"),
        &NoScram,
        late,
    )));
    assert_eq!(response.session_lifetime_ms, 3000);
    assert!(matches!(
        s.admit(metadata(), &NoScram, late + Duration::from_millis(2000)),
        Admit::Dispatch(_)
    ));
    // A second handshake within a second of the last is an ordinary request (Kafka
    // answers it ILLEGAL_SASL_STATE), not a re-authentication.
    let soon = late + Duration::from_millis(500);
    assert!(matches!(
        s.admit(handshake("PLAIN", 1), &NoScram, soon),
        Admit::Dispatch(_)
    ));
}

fn oauthbearer_session(reauth_ms: Option<u64>) -> SaslSession {
    let listener = SaslListener {
        mechanisms: vec![SaslMechanism::OAuthBearer],
        plain_users: BTreeMap::new(),
        connections_max_reauth_ms: reauth_ms,
        oauthbearer: Some(oauthbearer::OAuthBearerValidator::Unsecured(
            oauthbearer_unsecured::UnsecuredValidator::default(),
        )),
    };
    let settings = SaslSettings {
        listeners: BTreeMap::from([("SASL_PLAINTEXT".to_owned(), Arc::new(listener))]),
        max_receive_size: 524_288,
        failed_authentication_delay_ms: 100,
    };
    SaslSession::for_listener(&settings, "SASL_PLAINTEXT").expect("a SASL listener")
}

fn unsecured_login(sub: &str, expires_in_s: i64) -> Vec<u8> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    let exp = wall_clock_ms() / 1000 + expires_in_s;
    let claims = format!(r#"{{"sub":"{sub}","exp":{exp}}}"#);
    let token = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims)
    );
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

#[test]
fn oauthbearer_logs_in_the_subject_until_the_token_expires() {
    let mut s = oauthbearer_session(Some(3_600_000));
    let now = Instant::now();
    reply(s.admit(handshake("OAUTHBEARER", 1), &NoScram, now));
    let response = authenticate_response(reply(s.admit(
        authenticate(&unsecured_login("alice", 60)),
        &NoScram,
        now,
    )));
    assert_eq!(response.error_code, 0);
    // The token's 60 s, not connections.max.reauth.ms's hour (to the second).
    assert!(
        (58_000..=60_000).contains(&response.session_lifetime_ms),
        "{}",
        response.session_lifetime_ms
    );
    assert_eq!(s.principal().as_deref(), Some("User:alice"));
    assert!(matches!(
        s.admit(metadata(), &NoScram, now + Duration::from_secs(61)),
        Admit::Close(_)
    ));
}

#[test]
fn an_expired_oauthbearer_token_is_challenged_then_failed_after_the_delay() {
    let mut s = oauthbearer_session(None);
    let now = Instant::now();
    reply(s.admit(handshake("OAUTHBEARER", 1), &NoScram, now));
    let challenge = authenticate_response(reply(s.admit(
        authenticate(&unsecured_login("alice", -5)),
        &NoScram,
        now,
    )));
    assert_eq!(challenge.error_code, 0);
    assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
    let (reply, delay) = failure(s.admit(authenticate(b"\x01"), &NoScram, now));
    assert_eq!(delay, Duration::from_millis(100));
    let response = authenticate_response(reply);
    assert_eq!(response.error_code, 58);
    assert_eq!(
        response.error_message.map(|m| m.to_string()).as_deref(),
        Some(r#"{"status":"invalid_token"}"#)
    );
    assert_eq!(s.principal(), None);
}
