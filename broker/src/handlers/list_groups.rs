//! ListGroups (v0-5): every group this broker coordinates (all of them), with its state
//! (v4+, filterable, KIP-518) and type (v5+, filterable, KIP-848: "classic" or
//! "consumer"; a consumer group's protocol type is "consumer"). Filters compare
//! case-insensitively, as Kafka's do. While a `__consumer_offsets` partition led here is
//! still loading, the response is COORDINATOR_LOAD_IN_PROGRESS with no groups at all, as
//! Kafka's group coordinator answers (clients retry).

use brook_protocol::kafka_protocol::messages::list_groups_response::ListedGroup;
use brook_protocol::kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use brook_protocol::kafka_protocol::protocol::StrBytes;

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::group_code;
use crate::server::session::Session;

const CLASSIC: &str = "classic";
const CONSUMER: &str = "consumer";

pub fn handle(
    broker: &Broker,
    session: &Session,
    req: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    if let Err(e) = broker.groups.refuse_listing_while_loading() {
        return ListGroupsResponse::default().with_error_code(group_code(&e).code());
    }
    // Kafka's handleListGroupsRequest: DESCRIBE on the cluster lists every group, else
    // only the groups the session may DESCRIBE.
    let access = Access::new(broker, session);
    let all_groups = access.cluster(AclOperation::Describe);
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
    let classic = broker
        .groups
        .list()
        .into_iter()
        .map(|(id, protocol_type, state)| (id, protocol_type, state.name(), CLASSIC));
    let consumer = broker
        .groups
        .consumer_groups()
        .list()
        .into_iter()
        .filter(|(id, _)| broker.groups.coordinates(id).is_ok())
        .map(|(id, state)| (id, CONSUMER.to_owned(), state.name(), CONSUMER));
    let mut listed: Vec<_> = classic.chain(consumer).collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    let groups = listed
        .into_iter()
        .filter(|(id, ..)| all_groups || access.group(AclOperation::Describe, id))
        .filter(|(_, _, state, _)| states.is_empty() || states.contains(&state.to_lowercase()))
        .filter(|(.., kind)| types.is_empty() || types.iter().any(|t| t == kind))
        .map(|(id, protocol_type, state, kind)| {
            let mut g = ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type));
            if version >= 4 {
                g = g.with_group_state(StrBytes::from_static_str(state));
            }
            if version >= 5 {
                g = g.with_group_type(StrBytes::from_static_str(kind));
            }
            g
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
