//! DeleteGroups (v0-2): an Empty group goes with its offsets; a group with members is
//! `NON_EMPTY_GROUP`, an unknown one `GROUP_ID_NOT_FOUND`.

use brook_protocol::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use brook_protocol::kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::auth::acl::AclOperation;
use crate::auth::Access;
use crate::broker::Broker;
use crate::error::{group_code, Denied};
use crate::server::session::Session;

pub async fn handle(
    broker: &Broker,
    session: &Session,
    req: DeleteGroupsRequest,
    _version: i16,
) -> DeleteGroupsResponse {
    // Kafka's handleDeleteGroupsRequest: DELETE on each group.
    let access = Access::new(broker, session);
    let mut results = Vec::with_capacity(req.groups_names.len());
    for group_id in req.groups_names {
        let code = if !access.group(AclOperation::Delete, &group_id) {
            Denied::Group.code().code()
        } else {
            match broker.groups.delete_group(&group_id).await {
                Ok(()) => 0,
                Err(e) => group_code(&e).code(),
            }
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
