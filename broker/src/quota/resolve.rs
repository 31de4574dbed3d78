//! Which configured quota applies to a (user, client id), and which sensor it counts in:
//! Kafka's `DefaultQuotaCallback` (`quotaMetricTags` then `quotaLimit`), for one quota key
//! at a time (each key has its own entities, as each of Kafka's quota managers does).
//!
//! Precedence, first configured entity holding the key wins:
//! user+client > user+default-client > user > default-user+client >
//! default-user+default-client > default-user > client > default-client.
//! The sensor's tags are (user, client) for the user+client levels, (user, "") for the
//! user levels and ("", client) for the client levels: a user quota is shared by all the
//! user's clients, a default-client quota is one per client id. A client with an empty
//! client id matches only the user levels, as in Kafka (its tags name no client).

use brook_raft::{ClientQuotasImage, QuotaEntity};

use super::entity::{CLIENT_ID, USER};

/// One precedence level: the user part and the client part of its entity (`None`: the
/// entity has no such part; `Some(None)`: the default), whether its sensor's tags name
/// the client, and whether it applies to this client at all.
type Level<'a> = (Option<Option<&'a str>>, Option<Option<&'a str>>, bool, bool);

/// The quota that applies and its sensor's tags.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub bound: f64,
    pub user_tag: String,
    pub client_tag: String,
    /// The configured entity, as `kafka-configs` would name it, for metric labels.
    pub entity_label: String,
}

/// The quota on `key` for `user` (the principal's name) and `client_id`, if any.
pub fn resolve(
    quotas: &ClientQuotasImage,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<Found> {
    if quotas.is_empty() {
        return None;
    }
    let u = Some(user);
    let c = Some(client_id);
    // (user entity, client entity, tags name the client); `Some(None)` = the default.
    let both = !client_id.is_empty();
    let levels: [Level<'_>; 8] = [
        (Some(u), Some(c), true, both),
        (Some(u), Some(None), true, both),
        (Some(u), None, false, true),
        (Some(None), Some(c), true, both),
        (Some(None), Some(None), true, both),
        (Some(None), None, false, true),
        (None, Some(c), true, both),
        (None, Some(None), true, both),
    ];
    for (user_level, client_level, client_tagged, applies) in levels {
        if !applies {
            continue;
        }
        let mut entity = QuotaEntity::new();
        if let Some(name) = user_level {
            entity.insert(USER.to_owned(), name.map(str::to_owned));
        }
        if let Some(name) = client_level {
            entity.insert(CLIENT_ID.to_owned(), name.map(str::to_owned));
        }
        let Some(bound) = quotas.get(&entity).and_then(|v| v.get(key)) else {
            continue;
        };
        return Some(Found {
            bound: *bound,
            user_tag: if user_level.is_some() {
                user.to_owned()
            } else {
                String::new()
            },
            client_tag: if client_tagged {
                client_id.to_owned()
            } else {
                String::new()
            },
            entity_label: label(&entity),
        });
    }
    None
}

/// `user=alice,client-id=<default>`: the configured entity, bounded by configuration.
fn label(entity: &QuotaEntity) -> String {
    // Users first, as `kafka-configs` names an entity.
    [USER, CLIENT_ID]
        .iter()
        .filter_map(|t| {
            entity
                .get(*t)
                .map(|n| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use brook_raft::QuotaAlteration;

    use super::*;

    const KEY: &str = "producer_byte_rate";

    /// (user part, client part, value), parts as in [`Level`].
    type Configured<'a> = (Option<Option<&'a str>>, Option<Option<&'a str>>, f64);

    fn with(levels: &[Configured<'_>]) -> ClientQuotasImage {
        let mut image = ClientQuotasImage::default();
        let alterations: Vec<QuotaAlteration> = levels
            .iter()
            .map(|(u, c, v)| {
                let mut entity = QuotaEntity::new();
                if let Some(u) = u {
                    entity.insert(USER.into(), u.map(str::to_owned));
                }
                if let Some(c) = c {
                    entity.insert(CLIENT_ID.into(), c.map(str::to_owned));
                }
                QuotaAlteration {
                    entity,
                    set: BTreeMap::from([(KEY.to_owned(), *v)]),
                    remove: Vec::new(),
                }
            })
            .collect();
        image.alter(&alterations);
        image
    }

    fn bound(image: &ClientQuotasImage, user: &str, client: &str) -> Option<f64> {
        resolve(image, KEY, user, client).map(|f| f.bound)
    }

    #[test]
    fn each_level_beats_the_ones_after_it() {
        // All eight levels configured, values 1..=8 in precedence order.
        let all = [
            (Some(Some("alice")), Some(Some("c1")), 1.0),
            (Some(Some("alice")), Some(None), 2.0),
            (Some(Some("alice")), None, 3.0),
            (Some(None), Some(Some("c1")), 4.0),
            (Some(None), Some(None), 5.0),
            (Some(None), None, 6.0),
            (None, Some(Some("c1")), 7.0),
            (None, Some(None), 8.0),
        ];
        for drop in 0..all.len() {
            let image = with(&all[drop..]);
            assert_eq!(
                bound(&image, "alice", "c1"),
                Some(all[drop].2),
                "levels from {drop}"
            );
        }
        assert_eq!(bound(&with(&[]), "alice", "c1"), None);
    }

    #[test]
    fn sensors_are_shared_by_the_level_that_applied() {
        let user = with(&[(Some(Some("alice")), None, 10.0)]);
        let found = resolve(&user, KEY, "alice", "c1").expect("user quota");
        assert_eq!(
            (found.user_tag.as_str(), found.client_tag.as_str()),
            ("alice", "")
        );
        assert_eq!(found.entity_label, "user=alice");
        let client_default = with(&[(None, Some(None), 10.0)]);
        let found = resolve(&client_default, KEY, "alice", "c1").expect("default client");
        assert_eq!(
            (found.user_tag.as_str(), found.client_tag.as_str()),
            ("", "c1")
        );
        assert_eq!(found.entity_label, "client-id=<default>");
        let pair = with(&[(Some(None), Some(Some("c1")), 10.0)]);
        let found = resolve(&pair, KEY, "bob", "c1").expect("default user + client");
        assert_eq!(
            (found.user_tag.as_str(), found.client_tag.as_str()),
            ("bob", "c1")
        );
        assert_eq!(found.entity_label, "user=<default>,client-id=c1");
    }

    #[test]
    fn another_users_or_clients_quota_does_not_apply() {
        let image = with(&[
            (Some(Some("bob")), None, 1.0),
            (None, Some(Some("c2")), 2.0),
        ]);
        assert_eq!(bound(&image, "alice", "c1"), None);
        assert_eq!(bound(&image, "alice", "c2"), Some(2.0));
        // Another key's quota is not this one's.
        assert_eq!(resolve(&image, "consumer_byte_rate", "bob", "c1"), None);
    }

    #[test]
    fn an_empty_client_id_matches_only_user_levels() {
        let image = with(&[
            (None, Some(None), 1.0),
            (Some(Some("alice")), Some(None), 2.0),
        ]);
        assert_eq!(bound(&image, "alice", ""), None);
        let image = with(&[(Some(None), None, 3.0)]);
        assert_eq!(bound(&image, "alice", ""), Some(3.0));
    }
}
