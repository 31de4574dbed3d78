//! `brook format --initial-controllers id@host:port:directoryId,…`: the bootstrap voter set of a
//! dynamic quorum (KIP-853), parsed as Kafka's `DynamicVoters.parse` / `DynamicVoter.parse`
//! parse it, with their messages. Pure.

use std::collections::BTreeSet;

use base64::Engine as _;
use brook_raft::bootstrap::BootstrapVoter;

/// Parses the comma-separated list; `Err` is Kafka's message.
pub fn parse(input: &str) -> Result<Vec<BootstrapVoter>, String> {
    let mut voters = Vec::new();
    let mut ids = BTreeSet::new();
    for part in input.split(',') {
        let voter = parse_one(part)?;
        if !ids.insert(voter.id) {
            return Err(format!(
                "Node id {} was specified more than once.",
                voter.id
            ));
        }
        voters.push(voter);
    }
    if voters.is_empty() {
        return Err("No voters given.".into());
    }
    Ok(voters)
}

fn parse_one(input: &str) -> Result<BootstrapVoter, String> {
    let input = input.trim();
    let Some(at) = input.find('@') else {
        return Err("No @ found in dynamic voter string.".into());
    };
    if at == 0 {
        return Err("Invalid @ at beginning of dynamic voter string.".into());
    }
    let id: i32 = input[..at]
        .parse()
        .map_err(|_| "Failed to parse node id in dynamic voter string.".to_string())?;
    if id < 0 {
        return Err(format!(
            "Invalid negative node id {id} in dynamic voter string."
        ));
    }
    let rest = &input[at + 1..];
    if rest.is_empty() {
        return Err("No hostname found after node id.".into());
    }
    let (host, rest) = if let Some(bracketed) = rest.strip_prefix('[') {
        let Some(end) = bracketed.find(']') else {
            return Err("Hostname began with left bracket, but no right bracket was found.".into());
        };
        (&bracketed[..end], &bracketed[end + 1..])
    } else {
        let Some(end) = rest.find(':') else {
            return Err("No colon following hostname could be found.".into());
        };
        (&rest[..end], &rest[end..])
    };
    let Some(rest) = rest.strip_prefix(':') else {
        return Err("Port section must start with a colon.".into());
    };
    let Some(end) = rest.find(':') else {
        return Err("No colon following port could be found.".into());
    };
    let port: i32 = rest[..end]
        .parse()
        .map_err(|_| "Failed to parse port in dynamic voter string.".to_string())?;
    let port =
        u16::try_from(port).map_err(|_| format!("Invalid port {port} in dynamic voter string."))?;
    let directory_id = &rest[end + 1..];
    if !is_kafka_uuid(directory_id) {
        return Err("Failed to parse directory ID in dynamic voter string.".into());
    }
    Ok(BootstrapVoter {
        id: u64::try_from(id).unwrap_or_default(),
        host: host.to_owned(),
        port,
        directory_id: directory_id.to_owned(),
    })
}

/// Kafka's `Uuid.fromString`: 16 bytes in URL-safe base64 without padding.
pub fn is_kafka_uuid(text: &str) -> bool {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .is_ok_and(|bytes| bytes.len() == 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_example() {
        let voters =
            parse("0@example.com:8082:JEXY6aqzQY-32P5TStzaFg,1@[::1]:8083:MvDxzVmcRsaTz33bUuRU6A")
                .expect("parsed");
        assert_eq!(voters.len(), 2);
        assert_eq!(
            (voters[0].id, voters[0].host.as_str(), voters[0].port),
            (0, "example.com", 8082)
        );
        assert_eq!(voters[0].directory_id, "JEXY6aqzQY-32P5TStzaFg");
        assert_eq!((voters[1].host.as_str(), voters[1].port), ("::1", 8083));
    }

    #[test]
    fn bad_voter_strings_get_kafkas_messages() {
        let err = |s| parse(s).expect_err("refused");
        assert_eq!(err("1@h:1"), "No colon following port could be found.");
        assert_eq!(
            err("1@h:1:xyz"),
            "Failed to parse directory ID in dynamic voter string."
        );
        assert_eq!(err("h:1:x"), "No @ found in dynamic voter string.");
        assert_eq!(
            err("@h:1:x"),
            "Invalid @ at beginning of dynamic voter string."
        );
        assert_eq!(
            err("x@h:1:x"),
            "Failed to parse node id in dynamic voter string."
        );
        assert_eq!(
            err("1@h:99999:JEXY6aqzQY-32P5TStzaFg"),
            "Invalid port 99999 in dynamic voter string."
        );
        assert_eq!(
            err("1@h:1:JEXY6aqzQY-32P5TStzaFg,1@h:2:MvDxzVmcRsaTz33bUuRU6A"),
            "Node id 1 was specified more than once."
        );
    }
}
