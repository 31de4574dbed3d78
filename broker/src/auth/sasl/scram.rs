//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677), the server side, as Kafka's
//! `ScramSaslServer` runs it: client-first (`n,[a=authzid],n=user,r=nonce[,ext]`) →
//! server-first (`r=nonce+ours,s=salt,i=iterations`) → client-final
//! (`c=binding,r=nonce[,ext],p=proof`) → server-final (`v=signature`).
//!
//! The broker stores, per user and mechanism, what Kafka's `ScramCredential` holds: the
//! salt, the iterations, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
//! ServerKey = HMAC(SaltedPassword, "Server Key"); never the password (the client of
//! AlterUserScramCredentials sends the salted password, [`ScramCredential::derive`]).
//! Proofs are compared in constant time. An unknown user, a wrong proof or a malformed
//! message are all [`Failure::InvalidCredentials`]: Kafka answers them with one message so
//! a client cannot tell whether a user exists. Pure but for the server nonce.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::Failure;
use crate::config::sasl::SaslMechanism;

/// What the broker keeps of one user's SCRAM password for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// The credential for a salted password (Kafka's `ScramFormatter.generateCredential`).
    pub fn derive(
        mechanism: SaslMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = hmac(mechanism, salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: hash(mechanism, &client_key),
            server_key: hmac(mechanism, salted_password, b"Server Key"),
            iterations,
        }
    }
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// HMAC with the mechanism's hash (the inter-broker SCRAM client uses it too).
pub(crate) fn hmac(mechanism: SaslMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match mechanism {
        SaslMechanism::ScramSha512 => {
            let mut mac =
                <Hmac<Sha512> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        _ => {
            let mut mac =
                <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }
}

/// RFC 5802 `Hi(password, salt, i)`: PBKDF2 with the mechanism's HMAC and one block (the
/// inter-broker client's login, `brook format --add-scram`).
pub(crate) fn salted_password(
    mechanism: SaslMechanism,
    password: &[u8],
    salt: &[u8],
    i: u32,
) -> Vec<u8> {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac(mechanism, password, &block);
    let mut out = u.clone();
    for _ in 1..i {
        u = hmac(mechanism, password, &u);
        out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
    }
    out
}

pub(crate) fn hash(mechanism: SaslMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        SaslMechanism::ScramSha512 => Sha512::digest(data).to_vec(),
        _ => Sha256::digest(data).to_vec(),
    }
}

/// What a step of the exchange produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as `user`: send `reply` (the server-final message).
    Complete { reply: Vec<u8>, user: String },
}

enum State {
    ClientFirst,
    ClientFinal {
        user: String,
        gs2_header: String,
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
    },
    Done,
}

/// One SCRAM exchange on one connection.
pub struct ScramServer {
    mechanism: SaslMechanism,
    state: State,
}

impl ScramServer {
    pub fn new(mechanism: SaslMechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::ClientFirst,
        }
    }

    /// Evaluates the client's next message; `lookup` finds a user's credential for this
    /// mechanism.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Step, Failure> {
        let message = std::str::from_utf8(message).map_err(|_| Failure::InvalidCredentials)?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::ClientFirst => self.client_first(message, lookup),
            State::ClientFinal {
                user,
                gs2_header,
                client_first_bare,
                server_first,
                nonce,
                credential,
            } => {
                let final_message = ClientFinal::parse(message)?;
                let binding = B64.encode(gs2_header.as_bytes());
                if final_message.channel_binding != binding || final_message.nonce != nonce {
                    return Err(Failure::InvalidCredentials);
                }
                let auth_message = format!(
                    "{client_first_bare},{server_first},{}",
                    final_message.without_proof
                );
                let client_signature = hmac(
                    self.mechanism,
                    &credential.stored_key,
                    auth_message.as_bytes(),
                );
                let proof = B64
                    .decode(final_message.proof)
                    .map_err(|_| Failure::InvalidCredentials)?;
                if proof.len() != client_signature.len() {
                    return Err(Failure::InvalidCredentials);
                }
                let client_key: Vec<u8> = proof
                    .iter()
                    .zip(&client_signature)
                    .map(|(p, s)| p ^ s)
                    .collect();
                let computed = hash(self.mechanism, &client_key);
                if !bool::from(computed.ct_eq(&credential.stored_key)) {
                    return Err(Failure::InvalidCredentials);
                }
                let server_signature = hmac(
                    self.mechanism,
                    &credential.server_key,
                    auth_message.as_bytes(),
                );
                Ok(Step::Complete {
                    reply: format!("v={}", B64.encode(server_signature)).into_bytes(),
                    user,
                })
            }
            State::Done => Err(Failure::InvalidCredentials),
        }
    }

    fn client_first(
        &mut self,
        message: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Step, Failure> {
        // gs2-header: no channel binding ("n"; "y" means the client could have used it);
        // "p=" asks for channel binding, which Kafka does not offer either.
        let (gs2_flag, rest) = message.split_once(',').ok_or(Failure::InvalidCredentials)?;
        if gs2_flag != "n" && gs2_flag != "y" {
            return Err(Failure::InvalidCredentials);
        }
        let (authzid, client_first_bare) =
            rest.split_once(',').ok_or(Failure::InvalidCredentials)?;
        let authzid = match authzid {
            "" => None,
            a => Some(a.strip_prefix("a=").ok_or(Failure::InvalidCredentials)?),
        };
        let mut fields = client_first_bare.split(',');
        let user = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .and_then(decode_saslname)
            .ok_or(Failure::InvalidCredentials)?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| !n.is_empty())
            .ok_or(Failure::InvalidCredentials)?;
        // Extensions (`tokenauth=true` for delegation tokens): Brook has no tokens, and a
        // token login against a user's password credential must not succeed.
        if fields.any(|f| f.starts_with("tokenauth=") && f != "tokenauth=false") {
            return Err(Failure::InvalidCredentials);
        }
        if let Some(authzid) = authzid {
            if decode_saslname(authzid).as_deref() != Some(user.as_str()) {
                return Err(Failure::Message("Authentication failed: Client requested an authorization id that is different from username".to_owned()));
            }
        }
        let credential = lookup(&user).ok_or(Failure::InvalidCredentials)?;
        let nonce = format!("{client_nonce}{}", server_nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let challenge = server_first.clone().into_bytes();
        self.state = State::ClientFinal {
            user,
            gs2_header: format!(
                "{gs2_flag},{},",
                authzid.map(|a| format!("a={a}")).unwrap_or_default()
            ),
            client_first_bare: client_first_bare.to_owned(),
            server_first,
            nonce,
            credential,
        };
        Ok(Step::Challenge(challenge))
    }
}

/// 32 random characters from the OS's CSPRNG (through `uuid`'s v4 generator, already a
/// dependency), printable and without ',' as the nonce must be.
fn server_nonce() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// RFC 5802 `saslname`: `=2C` is ',' and `=3D` is '='; any other '=' is malformed.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

struct ClientFinal<'a> {
    channel_binding: &'a str,
    nonce: &'a str,
    without_proof: &'a str,
    proof: &'a str,
}

impl<'a> ClientFinal<'a> {
    fn parse(message: &'a str) -> Result<ClientFinal<'a>, Failure> {
        let (without_proof, proof) = message
            .rsplit_once(",p=")
            .ok_or(Failure::InvalidCredentials)?;
        let mut fields = without_proof.split(',');
        let channel_binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or(Failure::InvalidCredentials)?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(Failure::InvalidCredentials)?;
        Ok(ClientFinal {
            channel_binding,
            nonce,
            without_proof,
            proof,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's final message for the server's challenge.
    fn client_final(
        mechanism: SaslMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> (String, Vec<u8>) {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = &fields[0][2..];
        let salt = B64.decode(&fields[1][2..]).expect("base64");
        let iterations: u32 = fields[2][2..].parse().expect("number");
        let salted = salted_password(mechanism, password.as_bytes(), &salt, iterations);
        let client_key = hmac(mechanism, &salted, b"Client Key");
        let stored_key = hash(mechanism, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac(mechanism, &stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hmac(mechanism, &salted, b"Server Key");
        let expected_server_signature = hmac(mechanism, &server_key, auth.as_bytes());
        (
            format!("{without_proof},p={}", B64.encode(proof)),
            format!("v={}", B64.encode(expected_server_signature)).into_bytes(),
        )
    }

    #[test]
    fn rfc7677s_test_vector_derives_the_same_keys() {
        // RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096.
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("base64");
        let salted = salted_password(SaslMechanism::ScramSha256, b"pencil", &salt, 4096);
        let credential = ScramCredential::derive(SaslMechanism::ScramSha256, &salt, &salted, 4096);
        let client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let server_signature = hmac(
            SaslMechanism::ScramSha256,
            &credential.server_key,
            auth.as_bytes(),
        );
        assert_eq!(
            B64.encode(server_signature),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let (final_message, _) = client_final(
            SaslMechanism::ScramSha256,
            "pencil",
            client_first_bare,
            server_first,
        );
        assert_eq!(
            final_message,
            format!("{without_proof},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        );
    }

    fn exchange(
        mechanism: SaslMechanism,
        stored_password: &str,
        password: &str,
    ) -> Result<String, Failure> {
        let salt = b"0123456789abcdef";
        let salted = salted_password(mechanism, stored_password.as_bytes(), salt, 4096);
        let credential = ScramCredential::derive(mechanism, salt, &salted, 4096);
        let mut server = ScramServer::new(mechanism);
        let first = "n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
        let Step::Challenge(challenge) = server.step(first.as_bytes(), |user| {
            (user == "alice").then(|| credential.clone())
        })?
        else {
            panic!("a challenge first");
        };
        let server_first = String::from_utf8(challenge).expect("text");
        assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL"));
        let (final_message, expected) =
            client_final(mechanism, password, &first[3..], &server_first);
        match server.step(final_message.as_bytes(), |_| None)? {
            Step::Complete { reply, user } => {
                assert_eq!(reply, expected);
                Ok(user)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn both_mechanisms_log_in_with_the_right_password_only() {
        for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            assert_eq!(exchange(mechanism, "pw", "pw"), Ok("alice".to_owned()));
            assert_eq!(
                exchange(mechanism, "pw", "wrong"),
                Err(Failure::InvalidCredentials)
            );
        }
    }

    #[test]
    fn unknown_users_and_malformed_messages_are_invalid_credentials() {
        let mut server = ScramServer::new(SaslMechanism::ScramSha512);
        assert_eq!(
            server.step(b"n,,n=bob,r=abc", |_| None),
            Err(Failure::InvalidCredentials)
        );
        for bad in [
            "",
            "x",
            "p=tls-unique,,n=a,r=b",
            "n,,r=abc",
            "n,,n=a=ZZ,r=b",
        ] {
            let mut server = ScramServer::new(SaslMechanism::ScramSha512);
            assert!(server.step(bad.as_bytes(), |_| None).is_err(), "{bad}");
        }
        assert_eq!(decode_saslname("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
    }
}
