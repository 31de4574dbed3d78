//! Client quotas in the metadata image (KRaft's `ClientQuotaRecord`, `ClientQuotasImage`).
//!
//! A quota entity names up to three entity types — `user`, `client-id` (together or
//! alone) or `ip` (alone) — each with a name or, `None`, the type's default (`<default>`
//! in `kafka-configs`). Each entity holds its quota values by key (`producer_byte_rate`,
//! `consumer_byte_rate`, `request_percentage`, `controller_mutation_rate`,
//! `connection_creation_rate`) as Kafka does, as doubles. This crate knows no Kafka
//! types: the broker validates entity types, keys and values before proposing, so every
//! value here is finite and positive.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Entity type → name; `None` is the default entity of that type.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// One entity's change: keys set to new values, then keys removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    #[serde(default)]
    pub set: BTreeMap<String, f64>,
    #[serde(default)]
    pub remove: Vec<String>,
}

// The proposer refuses NaN (Kafka: "must be a finite number"), so equality is total.
impl Eq for QuotaAlteration {}

/// Every entity with at least one quota. Shared by `Arc` between images, so a consumer
/// can tell an unchanged quota set by pointer (`Arc::ptr_eq`) without comparing it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "Vec<QuotaEntry>", into = "Vec<QuotaEntry>")]
pub struct ClientQuotasImage {
    entities: Arc<BTreeMap<QuotaEntity, BTreeMap<String, f64>>>,
}

// Values are finite (checked by the proposer), so equality is total.
impl Eq for ClientQuotasImage {}

/// The stored form: JSON object keys must be strings, so entities become a list.
#[derive(Serialize, Deserialize)]
struct QuotaEntry {
    entity: QuotaEntity,
    values: BTreeMap<String, f64>,
}

impl From<Vec<QuotaEntry>> for ClientQuotasImage {
    fn from(entries: Vec<QuotaEntry>) -> Self {
        ClientQuotasImage {
            entities: Arc::new(
                entries
                    .into_iter()
                    .filter(|e| !e.values.is_empty())
                    .map(|e| (e.entity, e.values))
                    .collect(),
            ),
        }
    }
}

impl From<ClientQuotasImage> for Vec<QuotaEntry> {
    fn from(image: ClientQuotasImage) -> Self {
        image
            .entities
            .iter()
            .map(|(entity, values)| QuotaEntry {
                entity: entity.clone(),
                values: values.clone(),
            })
            .collect()
    }
}

impl ClientQuotasImage {
    /// Every entity and its quotas, in entity order.
    pub fn entities(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<String, f64>)> {
        self.entities.iter()
    }

    /// One entity's quotas.
    pub fn get(&self, entity: &QuotaEntity) -> Option<&BTreeMap<String, f64>> {
        self.entities.get(entity)
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Whether both are the very same set (cheap; `false` may still be equal).
    pub fn same(&self, other: &ClientQuotasImage) -> bool {
        Arc::ptr_eq(&self.entities, &other.entities)
    }

    /// Applies alterations in order; an entity left without quotas goes.
    pub fn alter(&mut self, alterations: &[QuotaAlteration]) {
        let entities = Arc::make_mut(&mut self.entities);
        for alteration in alterations {
            let values = entities.entry(alteration.entity.clone()).or_default();
            for (key, value) in &alteration.set {
                values.insert(key.clone(), *value);
            }
            for key in &alteration.remove {
                values.remove(key);
            }
            if values.is_empty() {
                entities.remove(&alteration.entity);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        pairs
            .iter()
            .map(|(t, n)| ((*t).to_owned(), n.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn alterations_set_then_remove_and_an_emptied_entity_goes() {
        let alice = entity(&[("user", Some("alice"))]);
        let default_client = entity(&[("client-id", None)]);
        let mut image = ClientQuotasImage::default();
        image.alter(&[
            QuotaAlteration {
                entity: alice.clone(),
                set: BTreeMap::from([
                    ("producer_byte_rate".into(), 1024.0),
                    ("consumer_byte_rate".into(), 2048.0),
                ]),
                remove: Vec::new(),
            },
            QuotaAlteration {
                entity: default_client.clone(),
                set: BTreeMap::from([("request_percentage".into(), 50.0)]),
                remove: Vec::new(),
            },
        ]);
        let before = image.clone();
        assert!(image.same(&before));
        image.alter(&[QuotaAlteration {
            entity: default_client.clone(),
            set: BTreeMap::new(),
            remove: vec!["request_percentage".into()],
        }]);
        assert!(!image.same(&before));
        assert_eq!(image.get(&default_client), None);
        assert_eq!(
            image.get(&alice).and_then(|v| v.get("consumer_byte_rate")),
            Some(&2048.0)
        );
    }

    #[test]
    fn the_image_round_trips_through_json_with_default_entities() {
        let mut image = ClientQuotasImage::default();
        image.alter(&[QuotaAlteration {
            entity: entity(&[("user", None), ("client-id", Some("c1"))]),
            set: BTreeMap::from([("producer_byte_rate".into(), 1048576.0)]),
            remove: Vec::new(),
        }]);
        let json = serde_json::to_string(&image).expect("serializable");
        assert_eq!(
            json,
            "[{\"entity\":{\"client-id\":\"c1\",\"user\":null},\"values\":{\"producer_byte_rate\":1048576.0}}]"
        );
        let back: ClientQuotasImage = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, image);
    }
}
