//! The broker's SASL login on a peer's inter-broker listener, as Kafka's
//! `SaslClientAuthenticator` runs it: SaslHandshake v1 naming
//! `sasl.mechanism.inter.broker.protocol`, then the mechanism's tokens in SaslAuthenticate
//! v2 requests. PLAIN sends `\0user\0password` once; SCRAM-SHA-256/512 (RFC 5802/7677) sends
//! client-first, answers the server-first with the proof and checks the server's signature,
//! so a broker never replicates from a peer that does not know its credential.
//!
//! [`ScramClient`] is pure but for the client nonce; the exchange itself runs over a
//! [`PeerConnection`] before any other request. Passwords and proofs never reach a log line.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use brook_protocol::kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use brook_protocol::kafka_protocol::protocol::StrBytes;
use bytes::Bytes;
use subtle::ConstantTimeEq;

use super::client::{PeerConnection, PeerError};
use crate::auth::sasl::scram::{hash, hmac, salted_password};
use crate::config::inter_broker::InterBrokerLogin;
use crate::config::sasl::SaslMechanism;

const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;
/// Kafka's `ScramMechanism.minIterations` (4096); the upper bound keeps a hostile peer
/// from making the login arbitrarily slow (Kafka's `maxIterations`, 16384).
const MIN_ITERATIONS: u32 = 4096;
const MAX_ITERATIONS: u32 = 16384;

/// Logs `conn` in with `login`; an error leaves the connection unusable.
pub async fn authenticate(
    conn: &mut PeerConnection,
    login: &InterBrokerLogin,
    timeout: Duration,
) -> Result<(), PeerError> {
    let refused = |addr: &str, reason: String| PeerError::Authentication {
        addr: addr.to_owned(),
        reason,
    };
    let handshake: SaslHandshakeResponse = conn
        .call(
            ApiKey::SaslHandshake,
            HANDSHAKE_VERSION,
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str(login.mechanism.name())),
            timeout,
        )
        .await?;
    if handshake.error_code != 0 {
        let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(refused(
            conn.addr(),
            format!(
                "SaslHandshake for {} answered error {} (the peer enables {})",
                login.mechanism.name(),
                handshake.error_code,
                offered.join(",")
            ),
        ));
    }
    if login.mechanism == SaslMechanism::Plain {
        let token = format!("\0{}\0{}", login.username, login.password.expose());
        send_token(conn, token.into_bytes(), timeout).await?;
        return Ok(());
    }
    let mut scram = ScramClient::new(login.mechanism, &login.username, login.password.expose());
    let server_first = send_token(conn, scram.client_first().into_bytes(), timeout).await?;
    let client_final = scram
        .client_final(&server_first)
        .map_err(|reason| refused(conn.addr(), reason))?;
    let server_final = send_token(conn, client_final.into_bytes(), timeout).await?;
    scram
        .check_server_final(&server_final)
        .map_err(|reason| refused(conn.addr(), reason))
}

/// One SaslAuthenticate round: the peer's answer token, or its refusal.
async fn send_token(
    conn: &mut PeerConnection,
    token: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, PeerError> {
    let response: SaslAuthenticateResponse = conn
        .call(
            ApiKey::SaslAuthenticate,
            AUTHENTICATE_VERSION,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
            timeout,
        )
        .await?;
    if response.error_code != 0 {
        return Err(PeerError::Authentication {
            addr: conn.addr().to_owned(),
            reason: format!(
                "SaslAuthenticate answered error {}: {}",
                response.error_code,
                response.error_message.as_deref().unwrap_or("no message")
            ),
        });
    }
    Ok(response.auth_bytes.to_vec())
}

/// The client side of one SCRAM exchange.
pub struct ScramClient {
    mechanism: SaslMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// After client-final: the signature the server must prove it can compute.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(mechanism: SaslMechanism, user: &str, password: &str) -> ScramClient {
        // 32 random characters from the OS's CSPRNG (uuid v4), printable and without ','.
        let nonce = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        ScramClient::with_nonce(mechanism, user, password, nonce)
    }

    fn with_nonce(
        mechanism: SaslMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> ScramClient {
        let user = user.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_owned(),
            client_first_bare: format!("n={user},r={nonce}"),
            nonce,
            expected_server_signature: None,
        }
    }

    /// `n,,n=<user>,r=<nonce>`: no channel binding, no authorization id.
    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client-final message answering `server_first` (`r=…,s=…,i=…`).
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<String, String> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| "the server-first message is not UTF-8".to_owned())?;
        let field = |name: &str| {
            text.split(',')
                .find_map(|f| f.strip_prefix(name))
                .ok_or_else(|| format!("the server-first message has no {name} field"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server nonce does not extend the client's".to_owned());
        }
        let salt = B64
            .decode(field("s=")?)
            .map_err(|_| "the salt is not base64".to_owned())?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| "the iteration count is not a number".to_owned())?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "the peer asks for {iterations} iterations, outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            ));
        }
        let salted = salted_password(self.mechanism, self.password.as_bytes(), &salt, iterations);
        let client_key = hmac(self.mechanism, &salted, b"Client Key");
        let stored_key = hash(self.mechanism, &client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = hmac(self.mechanism, &stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(self.mechanism, &salted, b"Server Key");
        self.expected_server_signature =
            Some(hmac(self.mechanism, &server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server-final message (`v=<signature>`, or `e=<error>`).
    pub fn check_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "the server-final message is not UTF-8".to_owned())?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(format!("the peer refused the login: {error}"));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v.split(',').next().unwrap_or(v)).ok())
            .ok_or_else(|| "the server-final message has no signature".to_owned())?;
        let expected = self
            .expected_server_signature
            .as_ref()
            .ok_or_else(|| "the server-final message came before the client-final".to_owned())?;
        if bool::from(signature.ct_eq(expected)) {
            Ok(())
        } else {
            Err(
                "the peer's server signature is wrong: it does not hold this broker's credential"
                    .to_owned(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::sasl::scram::{ScramCredential, ScramServer, Step};

    fn credential(mechanism: SaslMechanism, password: &str) -> ScramCredential {
        let salt = b"brook-salt".to_vec();
        let salted = salted_password(mechanism, password.as_bytes(), &salt, 4096);
        ScramCredential::derive(mechanism, &salt, &salted, 4096)
    }

    fn exchange(mechanism: SaslMechanism, stored: &str, tried: &str) -> Result<(), String> {
        let mut server = ScramServer::new(mechanism);
        let mut client = ScramClient::new(mechanism, "broker", tried);
        let cred = credential(mechanism, stored);
        let first = match server.step(client.client_first().as_bytes(), |u| {
            (u == "broker").then(|| cred.clone())
        }) {
            Ok(Step::Challenge(c)) => c,
            other => return Err(format!("{other:?}")),
        };
        let client_final = client.client_final(&first)?;
        match server.step(client_final.as_bytes(), |_| None) {
            Ok(Step::Complete { reply, user }) => {
                assert_eq!(user, "broker");
                client.check_server_final(&reply)
            }
            other => Err(format!("server: {other:?}")),
        }
    }

    #[test]
    fn the_scram_client_logs_in_to_brooks_own_scram_server() {
        for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            assert_eq!(exchange(mechanism, "s3cret", "s3cret"), Ok(()));
            assert!(exchange(mechanism, "s3cret", "wrong").is_err());
        }
    }

    #[test]
    fn hi_matches_rfc_7677s_example() {
        // RFC 7677 section 3: user, password pencil, salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096.
        let mut client = ScramClient::with_nonce(
            SaslMechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_owned(),
        );
        assert_eq!(client.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            client.client_final(server_first).as_deref(),
            Ok("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        );
        assert_eq!(
            client.check_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Ok(())
        );
        assert!(client.check_server_final(b"v=AAAA").is_err());
    }

    #[test]
    fn a_server_nonce_that_does_not_extend_ours_or_too_few_iterations_are_refused() {
        let mut client =
            ScramClient::with_nonce(SaslMechanism::ScramSha512, "u", "p", "abc".to_owned());
        assert!(client.client_final(b"r=xyz123,s=AAAA,i=4096").is_err());
        assert!(client.client_final(b"r=abc123,s=AAAA,i=1").is_err());
        assert!(client.client_final(b"r=abc123,s=AAAA,i=4096").is_ok());
    }
}
