//! `brook format --add-scram`, Kafka's `kafka-storage format --add-scram` syntax:
//! `SCRAM-SHA-256=[name=alice,password=alice-secret]`, also `iterations=N` (default 4096,
//! 4096..=16384) and `salt=<base64>` with `password` or `saltedpassword=<base64>`; a value
//! may be in double quotes. Bad input is refused with the sentence Kafka's `ScramParser`
//! prints. The credential is derived here (a random salt unless one is given) and only the
//! salt, StoredKey, ServerKey and iterations leave this file: never the password.
//! Pure but for the random salt.

use std::collections::BTreeMap;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use brook_raft::ScramUpsertion;
use ring::rand::{SecureRandom, SystemRandom};

use crate::auth::sasl::credentials::mechanism_type;
use crate::auth::sasl::scram::{salted_password, ScramCredential};
use crate::config::sasl::SaslMechanism;

/// Kafka's `ScramMechanism` bounds and `ScramParser`'s default.
const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;
const DEFAULT_ITERATIONS: i32 = 4096;
/// Random salt bytes (Kafka's are 26-odd printable ones; any bytes do, they travel base64).
const SALT_LEN: usize = 32;

/// Java's `Base64.getDecoder()`: the standard alphabet, padding optional.
const JAVA_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How the password is given.
enum Secret {
    Password(String),
    /// With its salt, which must then be given too.
    Salted(Vec<u8>),
}

/// One parsed `--add-scram` argument.
pub struct AddScram {
    mechanism: SaslMechanism,
    pub name: String,
    salt: Option<Vec<u8>>,
    iterations: Option<i32>,
    secret: Secret,
}

impl std::fmt::Debug for AddScram {
    // The password and salted password are secrets: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddScram")
            .field("mechanism", &self.mechanism.name())
            .field("name", &self.name)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Parses one argument; `Err` is Kafka's message.
pub fn parse(argument: &str) -> Result<AddScram, String> {
    let input = argument.trim();
    let Some((mechanism_name, config)) = input.split_once('=') else {
        return Err(format!(
            "Failed to find equals sign in SCRAM argument '{input}'"
        ));
    };
    let mechanism = match mechanism_name {
        "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
        "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
        other => return Err(format!("The add-scram mechanism {other} is not supported.")),
    };
    let Some(config) = config.strip_prefix('[') else {
        return Err("Expected configuration string to start with [".into());
    };
    let Some(config) = config.strip_suffix(']') else {
        return Err("Expected configuration string to end with ]".into());
    };
    let mut components = BTreeMap::new();
    for component in config.split(',') {
        let Some((key, value)) = component.split_once('=') else {
            return Err(format!(
                "No equals sign found in SCRAM component: {component}"
            ));
        };
        let value = match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            Some(unquoted) if value.len() >= 2 => unquoted,
            _ => value,
        };
        components.insert(key.to_owned(), value.to_owned());
    }
    let name = components
        .remove("name")
        .ok_or("You must supply 'name' to add-scram")?;
    let salt = match components.remove("salt") {
        Some(text) => Some(
            JAVA_BASE64
                .decode(&text)
                .map_err(|_| format!("Failed to decode given salt: {text}"))?,
        ),
        None => None,
    };
    let iterations = match components.remove("iterations") {
        Some(text) => Some(
            text.parse::<i32>()
                .map_err(|_| format!("Failed to parse iterations count: {text}"))?,
        ),
        None => None,
    };
    let password = components.remove("password");
    let salted = components.remove("saltedpassword");
    let secret = match (password, salted) {
        (Some(password), _) => Secret::Password(password),
        (None, None) => {
            return Err("You must supply one of 'password' or 'saltedpassword' to add-scram".into())
        }
        (None, Some(_)) if salt.is_none() => {
            return Err("You must supply 'salt' with 'saltedpassword' to add-scram".into())
        }
        (None, Some(text)) => Secret::Salted(
            JAVA_BASE64
                .decode(&text)
                .map_err(|_| format!("Failed to decode given saltedPassword: {text}"))?,
        ),
    };
    if !components.is_empty() {
        let unknown: Vec<&str> = components.keys().map(String::as_str).collect();
        return Err(format!(
            "Unknown SCRAM configurations: {}",
            unknown.join(", ")
        ));
    }
    Ok(AddScram {
        mechanism,
        name,
        salt,
        iterations,
        secret,
    })
}

impl AddScram {
    /// Kafka's enum name, as its iteration messages spell the mechanism.
    fn mechanism_enum_name(&self) -> &'static str {
        match self.mechanism {
            SaslMechanism::ScramSha512 => "SCRAM_SHA_512",
            _ => "SCRAM_SHA_256",
        }
    }

    /// The credential to store (Kafka's `UserScramCredentialRecord`); `Err` is Kafka's
    /// message for iterations out of bounds.
    pub fn upsertion(&self) -> Result<ScramUpsertion, String> {
        let iterations = self.iterations.unwrap_or(DEFAULT_ITERATIONS);
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {}",
                self.mechanism_enum_name()
            ));
        }
        if iterations > MAX_ITERATIONS {
            return Err(format!(
                "The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {}",
                self.mechanism_enum_name()
            ));
        }
        let salt = match &self.salt {
            Some(salt) => salt.clone(),
            None => random_salt()?,
        };
        let salted = match &self.secret {
            Secret::Password(password) => salted_password(
                self.mechanism,
                password.as_bytes(),
                &salt,
                iterations.unsigned_abs(),
            ),
            Secret::Salted(salted) => salted.clone(),
        };
        let credential = ScramCredential::derive(self.mechanism, &salt, &salted, iterations);
        Ok(ScramUpsertion {
            user: self.name.clone(),
            mechanism: mechanism_type(self.mechanism).expect("a SCRAM mechanism has a type"),
            credential: credential.into(),
        })
    }
}

fn random_salt() -> Result<Vec<u8>, String> {
    let mut salt = vec![0u8; SALT_LEN];
    SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| "the system's random number generator failed".to_owned())?;
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(argument: &str) -> String {
        parse(argument)
            .and_then(|a| a.upsertion().map(|_| a))
            .expect_err(argument)
    }

    #[test]
    fn bad_arguments_are_refused_with_kafkas_sentences() {
        // Each as Kafka 4.4's `kafka-storage format --add-scram` prints it.
        for (argument, message) in [
            (
                "SCRAM-SHA-512",
                "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'",
            ),
            (
                "SCRAM-SHA-1=[name=a,password=b]",
                "The add-scram mechanism SCRAM-SHA-1 is not supported.",
            ),
            (
                "scram-sha-512=[name=a,password=b]",
                "The add-scram mechanism scram-sha-512 is not supported.",
            ),
            (
                "SCRAM-SHA-512=name=a,password=b]",
                "Expected configuration string to start with [",
            ),
            (
                "SCRAM-SHA-512=[name=a,password=b",
                "Expected configuration string to end with ]",
            ),
            (
                "SCRAM-SHA-512=[password=b]",
                "You must supply 'name' to add-scram",
            ),
            (
                "SCRAM-SHA-512=[name=a]",
                "You must supply one of 'password' or 'saltedpassword' to add-scram",
            ),
            (
                "SCRAM-SHA-512=[name=a,saltedpassword=eHl6]",
                "You must supply 'salt' with 'saltedpassword' to add-scram",
            ),
            (
                "SCRAM-SHA-512=[name=a,password=b,iterations=100]",
                "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_512",
            ),
            (
                "SCRAM-SHA-256=[name=a,password=b,iterations=20000]",
                "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_256",
            ),
            (
                "SCRAM-SHA-512=[name=a,password=b,iterations=x]",
                "Failed to parse iterations count: x",
            ),
            (
                "SCRAM-SHA-512=[name=a,password=b,foo=1,bar=2]",
                "Unknown SCRAM configurations: bar, foo",
            ),
            (
                "SCRAM-SHA-512=[name=a,password]",
                "No equals sign found in SCRAM component: password",
            ),
            (
                "SCRAM-SHA-512=[name=a,password=b,salt=!!]",
                "Failed to decode given salt: !!",
            ),
        ] {
            assert_eq!(refused(argument), message, "{argument}");
        }
    }

    #[test]
    fn a_password_gets_a_random_salt_and_the_credential_logs_it_in() {
        let arg =
            parse(r#" SCRAM-SHA-512=[name="admin",password="admin-secret",iterations=8192] "#)
                .expect("parses");
        assert_eq!(arg.name, "admin");
        let (first, second) = (arg.upsertion().expect("one"), arg.upsertion().expect("two"));
        assert_eq!((first.user.as_str(), first.mechanism), ("admin", 2));
        assert_eq!(first.credential.iterations, 8192);
        assert_eq!(first.credential.salt.len(), SALT_LEN);
        assert_ne!(
            first.credential.salt, second.credential.salt,
            "salts are random"
        );
        let salted = salted_password(
            SaslMechanism::ScramSha512,
            b"admin-secret",
            &first.credential.salt,
            8192,
        );
        let expected = ScramCredential::derive(
            SaslMechanism::ScramSha512,
            &first.credential.salt,
            &salted,
            8192,
        );
        assert_eq!(first.credential, expected.into());
    }

    #[test]
    fn a_given_salt_and_salted_password_are_stored_as_given_with_the_default_iterations() {
        // RFC 7677's example: salt W22ZaJ0SNY7soEsUEjb6gQ==, password "pencil", 4096.
        let salt = JAVA_BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ").expect("salt");
        let salted = salted_password(SaslMechanism::ScramSha256, b"pencil", &salt, 4096);
        let argument = format!(
            "SCRAM-SHA-256=[name=user,salt=\"W22ZaJ0SNY7soEsUEjb6gQ==\",saltedpassword={}]",
            JAVA_BASE64.encode(&salted)
        );
        let upsertion = parse(&argument)
            .expect("parses")
            .upsertion()
            .expect("valid");
        let from_password =
            parse("SCRAM-SHA-256=[name=user,salt=W22ZaJ0SNY7soEsUEjb6gQ==,password=pencil]")
                .expect("parses")
                .upsertion()
                .expect("valid");
        assert_eq!(upsertion, from_password);
        assert_eq!(
            (upsertion.mechanism, upsertion.credential.iterations),
            (1, 4096)
        );
        assert_eq!(upsertion.credential.salt, salt);
    }

    #[test]
    fn debug_output_never_shows_the_password() {
        let arg = parse("SCRAM-SHA-512=[name=a,password=hunter2]").expect("parses");
        assert!(!format!("{arg:?}").contains("hunter2"));
    }
}
