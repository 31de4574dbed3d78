//! The OAUTHBEARER token checks: the client's initial response, unsecured JWS (KIP-255),
//! signed JWTs against a JWKS (KIP-768, RSA and EC keys signed here with ring), the JSON
//! error challenges and the session lifetime (KIP-368).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256,
};
use serde_json::{json, Value};

use super::oauthbearer::{parse_initial_response, OAuthBearerServer, OAuthBearerValidator, Step};
use super::oauthbearer_jwks::JwkSet;
use super::oauthbearer_signed::SignedValidator;
use super::oauthbearer_unsecured::UnsecuredValidator;
use super::{session_lifetime_ms, Failure};

const NOW_S: i64 = 1_800_000_000;
const NOW_MS: i64 = NOW_S * 1000;
/// A 2048-bit RSA key, PKCS#1 DER (`openssl genpkey -algorithm RSA -outform DER`): ring
/// signs with RSA but cannot make RSA keys.
const RSA_PKCS1_DER: &[u8] = include_bytes!("../testdata/jwt-signing-rsa.der");

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

fn unsecured_token(claims: Value) -> String {
    format!("{}.{}.", b64(&json!({"alg": "none"})), b64(&claims))
}

fn initial_response(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

// ---- the client's initial response ----

#[test]
fn the_initial_response_gives_the_token_and_authzid_and_accepts_extensions() {
    let parsed = parse_initial_response(b"n,,\x01auth=Bearer abc.def.\x01\x01").expect("valid");
    assert_eq!((parsed.authzid, parsed.token), ("", "abc.def."));
    let parsed =
        parse_initial_response(b"n,a=alice,\x01traceId=42\x01auth=bearer  x-y_z~+/=\x01\x01")
            .expect("valid");
    assert_eq!((parsed.authzid, parsed.token), ("alice", "x-y_z~+/="));
    for bad in [
        &b"n,,\x01\x01"[..],
        b"y,,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Basic t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"n,,\x01auth=Bearer t t\x01\x01",
        b"n,,\x01auth=Bearer t\x01k-1=v\x01\x01",
        b"n,b=x,\x01auth=Bearer t\x01\x01",
    ] {
        assert_eq!(parse_initial_response(bad), None, "{bad:?}");
    }
}

// ---- unsecured JWS ----

#[test]
fn an_unsecured_token_gives_its_subject_and_expiry() {
    let v = UnsecuredValidator::default();
    let token = unsecured_token(json!({"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600}));
    let valid = v.validate(&token, NOW_MS).expect("valid");
    assert_eq!(valid.principal, "alice");
    assert_eq!(valid.expires_at_ms, (NOW_S + 3600) * 1000);
    // Kafka's own unsecured login writes fractional seconds.
    let token = unsecured_token(json!({"sub": "bob", "exp": NOW_S as f64 + 0.5}));
    assert_eq!(
        v.validate(&token, NOW_MS).expect("valid").expires_at_ms,
        NOW_MS + 500
    );
}

#[test]
fn unsecured_tokens_are_refused_as_kafka_refuses_them() {
    let v = UnsecuredValidator::default();
    let refused = |claims: Value| {
        v.validate(&unsecured_token(claims), NOW_MS)
            .expect_err("refused")
            .reason
    };
    assert_eq!(refused(json!({"sub": "a"})), "No expiration time in JWT");
    assert_eq!(
        refused(json!({"exp": NOW_S + 60})),
        "No principal name in JWT claim: sub"
    );
    assert_eq!(
        refused(json!({"sub": "  ", "exp": NOW_S + 60})),
        "No principal name in JWT claim: sub"
    );
    assert!(
        refused(json!({"sub": "a", "exp": NOW_S})).contains("was on or after the Expiration Time")
    );
    assert!(
        refused(json!({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S + 1})).contains("Issued At")
    );
    assert!(refused(json!({"sub": "a", "exp": "soon"})).contains("not of type Number"));
    let signed = format!(
        "{}.{}.c2ln",
        b64(&json!({"alg": "none"})),
        b64(&json!({"sub": "a", "exp": NOW_S + 60}))
    );
    assert_eq!(
        v.validate(&signed, NOW_MS).expect_err("signature").reason,
        "Unsecured JWS must not contain a digital signature"
    );
    let rs256 = format!(
        "{}.{}.",
        b64(&json!({"alg": "RS256"})),
        b64(&json!({"sub": "a", "exp": NOW_S + 60}))
    );
    assert_eq!(
        v.validate(&rs256, NOW_MS).expect_err("alg").reason,
        "Unsecured JWS must have 'none' for an algorithm"
    );
    assert!(v.validate("a..b", NOW_MS).is_err());
    assert!(v.validate("not-a-jwt", NOW_MS).is_err());
}

#[test]
fn unsecured_clock_skew_principal_claim_and_required_scope_follow_the_jaas_options() {
    let options = [
        ("unsecuredValidatorPrincipalClaimName", "upn"),
        ("unsecuredValidatorRequiredScope", "read write"),
        ("unsecuredValidatorAllowableClockSkewMs", "5000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let v = UnsecuredValidator::from_jaas_options(&options).expect("valid");
    let token =
        unsecured_token(json!({"upn": "carol", "exp": NOW_S - 2, "scope": ["write", "read", "x"]}));
    assert_eq!(
        v.validate(&token, NOW_MS).expect("within skew").principal,
        "carol"
    );
    let token = unsecured_token(json!({"upn": "carol", "exp": NOW_S + 60, "scope": "read"}));
    let error = v.validate(&token, NOW_MS).expect_err("missing write");
    assert_eq!(error.scope.as_deref(), Some("[read, write]"));
    let validator = OAuthBearerValidator::Unsecured(v);
    assert_eq!(
        validator.error_challenge(&error),
        r#"{"status":"insufficient_scope", "scope":"[read, write]"}"#
    );
}

// ---- signed JWTs ----

struct Signer {
    rsa: RsaKeyPair,
    ec: EcdsaKeyPair,
    rng: SystemRandom,
}

impl Signer {
    fn new() -> Signer {
        let rng = SystemRandom::new();
        let ec_pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("EC key");
        Signer {
            rsa: RsaKeyPair::from_der(RSA_PKCS1_DER).expect("RSA key"),
            ec: EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, ec_pkcs8.as_ref(), &rng)
                .expect("EC key"),
            rng,
        }
    }

    fn jwks(&self) -> JwkSet {
        let rsa = RsaPublicKeyComponents::<Vec<u8>>::from(self.rsa.public());
        let point = self.ec.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        JwkSet::parse(
            &json!({"keys": [
                {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
                 "n": URL_SAFE_NO_PAD.encode(&rsa.n), "e": URL_SAFE_NO_PAD.encode(&rsa.e)},
                {"kty": "EC", "kid": "ec-1", "crv": "P-256",
                 "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)},
                {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            ]})
            .to_string(),
        )
        .expect("JWKS")
    }

    fn sign(&self, alg: &str, kid: &str, claims: Value) -> String {
        let input = format!(
            "{}.{}",
            b64(&json!({"alg": alg, "kid": kid, "typ": "JWT"})),
            b64(&claims)
        );
        let signature = if alg == "ES256" {
            self.ec
                .sign(&self.rng, input.as_bytes())
                .expect("sign")
                .as_ref()
                .to_vec()
        } else {
            let mut signature = vec![0; self.rsa.public().modulus_len()];
            self.rsa
                .sign(
                    &RSA_PKCS1_SHA256,
                    &self.rng,
                    input.as_bytes(),
                    &mut signature,
                )
                .expect("sign");
            signature
        };
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }
}

fn signed_validator(signer: &Signer) -> SignedValidator {
    SignedValidator {
        keys: signer.jwks(),
        expected_audience: vec!["kafka".to_owned()],
        expected_issuer: Some("https://issuer.example".to_owned()),
        sub_claim: "sub".to_owned(),
        scope_claim: "scope".to_owned(),
        clock_skew_seconds: 30,
    }
}

fn good_claims() -> Value {
    json!({"sub": "alice", "iss": "https://issuer.example", "aud": ["kafka", "other"],
           "iat": NOW_S - 5, "exp": NOW_S + 600, "scope": "produce consume"})
}

#[test]
fn a_signed_token_verifies_with_rs256_and_es256_keys_chosen_by_kid() {
    let signer = Signer::new();
    let v = signed_validator(&signer);
    for (alg, kid) in [("RS256", "rsa-1"), ("ES256", "ec-1")] {
        let valid = v
            .validate(&signer.sign(alg, kid, good_claims()), NOW_MS)
            .expect(alg);
        assert_eq!(valid.principal, "alice");
        assert_eq!(valid.expires_at_ms, (NOW_S + 600) * 1000);
    }
    let refused = v
        .validate(&signer.sign("RS256", "ec-1", good_claims()), NOW_MS)
        .expect_err("wrong key type");
    assert!(
        refused
            .reason
            .contains("Unable to find a suitable verification key"),
        "{refused:?}"
    );
    let refused = v
        .validate(&signer.sign("RS256", "unknown", good_claims()), NOW_MS)
        .expect_err("unknown kid");
    assert!(
        refused
            .reason
            .contains("Unable to find a suitable verification key"),
        "{refused:?}"
    );
}

#[test]
fn a_tampered_or_unsigned_token_is_refused() {
    let signer = Signer::new();
    let v = signed_validator(&signer);
    let token = signer.sign("RS256", "rsa-1", good_claims());
    let (input, signature) = token.rsplit_once('.').expect("three parts");
    let (header, _) = input.split_once('.').expect("header");
    let mut claims = good_claims();
    claims["sub"] = json!("mallory");
    let tampered = format!("{header}.{}.{signature}", b64(&claims));
    assert_eq!(
        v.validate(&tampered, NOW_MS).expect_err("tampered").reason,
        "JWS signature is invalid"
    );
    let unsigned = unsecured_token(good_claims());
    assert!(v.validate(&unsigned, NOW_MS).is_err());
}

#[test]
fn signed_claims_are_checked_as_jose4j_checks_them() {
    let signer = Signer::new();
    let v = signed_validator(&signer);
    let refused = |change: &dyn Fn(&mut Value)| {
        let mut claims = good_claims();
        change(&mut claims);
        v.validate(&signer.sign("RS256", "rsa-1", claims), NOW_MS)
            .expect_err("refused")
            .reason
    };
    assert!(refused(&|c| c["exp"] = json!(NOW_S - 31)).contains("no longer valid"));
    assert!(refused(&|c| c["nbf"] = json!(NOW_S + 31)).contains("not yet valid"));
    assert!(refused(&|c| c["aud"] = json!("somebody-else"))
        .contains("doesn't contain an acceptable identifier"));
    assert!(refused(&|c| {
        c.as_object_mut().expect("object").remove("aud");
    })
    .contains("No Audience"));
    assert!(refused(&|c| c["iss"] = json!("https://evil.example"))
        .contains("doesn't match expected value"));
    assert!(refused(&|c| {
        c.as_object_mut().expect("object").remove("iat");
    })
    .contains("No Issued At"));
    assert!(refused(&|c| {
        c.as_object_mut().expect("object").remove("exp");
    })
    .contains("No Expiration Time"));
    assert!(refused(&|c| c["sub"] = json!(42)).contains("Could not extract the 'sub' claim"));
    // Within the clock skew an expired or early token still passes.
    let mut claims = good_claims();
    claims["exp"] = json!(NOW_S - 29);
    claims["nbf"] = json!(NOW_S + 29);
    assert!(v
        .validate(&signer.sign("ES256", "ec-1", claims), NOW_MS)
        .is_ok());
    // Without an expected audience, a token that names one is refused (jose4j's default).
    let lenient = SignedValidator {
        expected_audience: Vec::new(),
        expected_issuer: None,
        ..signed_validator(&signer)
    };
    assert!(lenient
        .validate(&signer.sign("RS256", "rsa-1", good_claims()), NOW_MS)
        .is_err());
    let mut claims = good_claims();
    claims.as_object_mut().expect("object").remove("aud");
    assert!(lenient
        .validate(&signer.sign("RS256", "rsa-1", claims), NOW_MS)
        .is_ok());
}

#[test]
fn a_jwks_without_a_usable_key_or_with_bad_key_material_is_refused() {
    assert!(JwkSet::parse(r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).is_err());
    assert!(JwkSet::parse(r#"{"keys":[{"kty":"RSA","kid":"k","n":"!!","e":"AQAB"}]}"#).is_err());
    assert!(JwkSet::parse(r#"{"not":"a jwks"}"#).is_err());
    assert!(JwkSet::parse("[").is_err());
    let set = JwkSet::parse(r#"{"keys":[{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"},{"kty":"RSA","n":"AQAB","e":"AQAB"}]}"#)
        .expect("one signing key");
    assert_eq!(set.keys.len(), 1);
}

// ---- the exchange ----

#[test]
fn a_refused_token_gets_the_json_challenge_then_fails_with_it_after_control_a() {
    let v = OAuthBearerValidator::Unsecured(UnsecuredValidator::default());
    let mut server = OAuthBearerServer::default();
    let expired = unsecured_token(json!({"sub": "alice", "exp": NOW_S - 1}));
    let step = server
        .step(&initial_response(&expired), &v, NOW_MS)
        .expect("a challenge");
    assert_eq!(
        step,
        Step::Challenge(br#"{"status":"invalid_token"}"#.to_vec())
    );
    assert_eq!(
        server.step(b"\x01", &v, NOW_MS),
        Err(Failure::Message(r#"{"status":"invalid_token"}"#.to_owned()))
    );
    assert_eq!(
        server.step(b"garbage", &v, NOW_MS),
        Err(Failure::InvalidCredentials)
    );
}

#[test]
fn an_authorization_id_must_be_the_tokens_principal() {
    let v = OAuthBearerValidator::Unsecured(UnsecuredValidator::default());
    let token = unsecured_token(json!({"sub": "alice", "exp": NOW_S + 60}));
    let mut server = OAuthBearerServer::default();
    let message = format!("n,a=alice,\x01auth=Bearer {token}\x01\x01");
    assert_eq!(
        server.step(message.as_bytes(), &v, NOW_MS),
        Ok(Step::Complete {
            user: "alice".to_owned(),
            expires_at_ms: (NOW_S + 60) * 1000
        })
    );
    let message = format!("n,a=bob,\x01auth=Bearer {token}\x01\x01");
    assert_eq!(
        server.step(message.as_bytes(), &v, NOW_MS),
        Err(Failure::Message("Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)".to_owned()))
    );
}

#[test]
fn the_session_lasts_until_the_token_expires_capped_by_connections_max_reauth_ms() {
    assert_eq!(session_lifetime_ms(None, None, NOW_MS), None);
    assert_eq!(session_lifetime_ms(None, Some(3000), NOW_MS), Some(3000));
    assert_eq!(
        session_lifetime_ms(Some(NOW_MS + 60_000), None, NOW_MS),
        Some(60_000)
    );
    assert_eq!(
        session_lifetime_ms(Some(NOW_MS + 60_000), Some(3000), NOW_MS),
        Some(3000)
    );
    assert_eq!(
        session_lifetime_ms(Some(NOW_MS + 1000), Some(3000), NOW_MS),
        Some(1000)
    );
    assert_eq!(
        session_lifetime_ms(Some(NOW_MS - 1000), None, NOW_MS),
        Some(0)
    );
}
