//! Protocol selection for a completed join (Kafka's `ClassicGroup.selectProtocol`) and
//! the member list the leader receives. Pure logic.

use bytes::Bytes;

use super::state::Group;

impl Group {
    /// The protocol every member supports that most members list first among those.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| &p == n))
            })
            .collect();
        let mut votes: Vec<(usize, &String)> = candidates.iter().map(|c| (0, *c)).collect();
        for member in self.members.values() {
            let choice = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(&n));
            if let Some((name, _)) = choice {
                if let Some(v) = votes.iter_mut().find(|(_, c)| *c == name) {
                    v.0 += 1;
                }
            }
        }
        // Ties go to the earliest candidate, as Kafka's `maxBy` over the vote list does.
        let mut best: Option<(usize, &String)> = None;
        for (count, name) in votes {
            if best.is_none_or(|(c, _)| count > c) {
                best = Some((count, name));
            }
        }
        best.map(|(_, n)| n.clone())
    }

    pub(super) fn member_metadata(&self) -> Vec<(String, Option<String>, Bytes)> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| {
                let metadata = m.metadata(&protocol);
                (m.member_id.clone(), m.group_instance_id.clone(), metadata)
            })
            .collect()
    }
}
