//! The verification keys of signed OAUTHBEARER tokens (KIP-768): a JSON Web Key Set
//! (RFC 7517) as an OAuth provider publishes it at its JWKS endpoint, and JWS signature
//! checks on them with `ring`. RSA keys verify RS256/384/512 and PS256/384/512; EC keys
//! on P-256 and P-384 verify ES256 and ES384. A key is chosen as jose4j (Kafka's JWT
//! library) chooses it: by the token's `kid` when it names one, by the key type its `alg`
//! needs, and never a key whose `use` is not `sig` or whose own `alg` differs. Keys of
//! other kinds (symmetric, Ed25519) are skipped. Pure.

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;

use super::oauthbearer_token::{decode_base64url, TokenError};

/// One usable public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The key's own `alg`, when the set says it.
    pub alg: Option<String>,
    pub key: PublicKey,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicKey {
    /// Modulus and public exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed point (`0x04 || x || y`) on `curve`.
    Ec { curve: Curve, point: Vec<u8> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
}

/// A JWKS document's usable keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JwkSet {
    pub keys: Vec<Jwk>,
}

impl JwkSet {
    /// Parses a JWKS document; the error says what is wrong (no key material in it).
    pub fn parse(text: &str) -> Result<JwkSet, String> {
        let document: Value =
            serde_json::from_str(text).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
        let Some(entries) = document.get("keys").and_then(Value::as_array) else {
            return Err("not a JSON Web Key Set: no \"keys\" array".to_owned());
        };
        let mut keys = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let text = |name: &str| entry.get(name).and_then(Value::as_str);
            let bytes = |name: &str| {
                text(name).and_then(decode_base64url).ok_or_else(|| {
                    format!(
                        "key {index} (kid {}): \"{name}\" is missing or not Base64URL",
                        text("kid").unwrap_or("none")
                    )
                })
            };
            if text("use").is_some_and(|u| u != "sig") {
                continue;
            }
            let key = match text("kty") {
                Some("RSA") => PublicKey::Rsa {
                    n: strip_leading_zeros(bytes("n")?),
                    e: strip_leading_zeros(bytes("e")?),
                },
                Some("EC") => {
                    let curve = match text("crv") {
                        Some("P-256") => Curve::P256,
                        Some("P-384") => Curve::P384,
                        _ => continue,
                    };
                    let (x, y) = (bytes("x")?, bytes("y")?);
                    let mut point = Vec::with_capacity(1 + x.len() + y.len());
                    point.push(0x04);
                    point.extend_from_slice(&x);
                    point.extend_from_slice(&y);
                    PublicKey::Ec { curve, point }
                }
                _ => continue,
            };
            keys.push(Jwk {
                kid: text("kid").map(str::to_owned),
                alg: text("alg").map(str::to_owned),
                key,
            });
        }
        if keys.is_empty() {
            return Err(
                "the JSON Web Key Set holds no RSA or EC (P-256, P-384) signature key".to_owned(),
            );
        }
        Ok(JwkSet { keys })
    }

    /// Verifies the signature `signature_b64` of `signing_input`, made with `alg` by the key
    /// `kid` (or any key fit for `alg` when the token names none).
    pub fn verify(
        &self,
        alg: &str,
        kid: Option<&str>,
        signing_input: &[u8],
        signature_b64: &str,
    ) -> Result<(), TokenError> {
        let Some(algorithm) = Algorithm::from_name(alg) else {
            return Err(TokenError::new(format!(
                "'{alg}' is not a JWS algorithm Brook verifies (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384)"
            )));
        };
        let signature = decode_base64url(signature_b64)
            .ok_or_else(|| TokenError::new("the JWS signature is not Base64URL"))?;
        let mut candidates = self
            .keys
            .iter()
            .filter(|k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg))
            .filter(|k| algorithm.fits(&k.key))
            .peekable();
        if candidates.peek().is_none() {
            return Err(TokenError::new(format!(
                "Unable to find a suitable verification key for JWS w/ header {{\"alg\":\"{alg}\",\"kid\":{}}}",
                kid.map_or_else(|| "null".to_owned(), |k| format!("\"{k}\""))
            )));
        }
        if candidates.any(|k| algorithm.verify(&k.key, signing_input, &signature)) {
            Ok(())
        } else {
            Err(TokenError::new("JWS signature is invalid"))
        }
    }
}

/// JWK integers are unsigned big-endian; ring wants no leading zero bytes.
fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

#[derive(Clone, Copy)]
enum Algorithm {
    Rsa(&'static signature::RsaParameters),
    Ec(Curve, &'static signature::EcdsaVerificationAlgorithm),
}

impl Algorithm {
    fn from_name(alg: &str) -> Option<Algorithm> {
        Some(match alg {
            "RS256" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
            "RS384" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
            "RS512" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
            "PS256" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA256),
            "PS384" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA384),
            "PS512" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA512),
            "ES256" => Algorithm::Ec(Curve::P256, &signature::ECDSA_P256_SHA256_FIXED),
            "ES384" => Algorithm::Ec(Curve::P384, &signature::ECDSA_P384_SHA384_FIXED),
            _ => return None,
        })
    }

    fn fits(self, key: &PublicKey) -> bool {
        match (self, key) {
            (Algorithm::Rsa(_), PublicKey::Rsa { .. }) => true,
            (Algorithm::Ec(curve, _), PublicKey::Ec { curve: c, .. }) => curve == *c,
            _ => false,
        }
    }

    fn verify(self, key: &PublicKey, message: &[u8], signature: &[u8]) -> bool {
        match (self, key) {
            (Algorithm::Rsa(parameters), PublicKey::Rsa { n, e }) => RsaPublicKeyComponents {
                n: n.as_slice(),
                e: e.as_slice(),
            }
            .verify(parameters, message, signature)
            .is_ok(),
            (Algorithm::Ec(_, algorithm), PublicKey::Ec { point, .. }) => {
                UnparsedPublicKey::new(algorithm, point)
                    .verify(message, signature)
                    .is_ok()
            }
            _ => false,
        }
    }
}
