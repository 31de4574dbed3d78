//! What ConsumerGroupDescribe shows of a group: epochs, state, assignor and per member
//! its current and target assignment (topic names resolved by the handler).

use super::group::ConsumerGroup;
use super::member::Assignment;

#[derive(Debug, Clone)]
pub struct ConsumerGroupDescription {
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<ConsumerMemberDescription>,
}

#[derive(Debug, Clone)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Assignment,
    pub target_assignment: Assignment,
    /// The member speaks the classic protocol (ConsumerGroupDescribe v1's `MemberType` 0).
    pub classic: bool,
}

impl ConsumerGroup {
    pub fn describe(&self) -> ConsumerGroupDescription {
        ConsumerGroupDescription {
            state: self.state().name(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.assignor_name.clone(),
            members: self
                .members
                .values()
                .map(|m| ConsumerMemberDescription {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.clone(),
                    subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                    assignment: m.assigned.clone(),
                    target_assignment: self.target.get(&m.member_id).cloned().unwrap_or_default(),
                    classic: m.classic.is_some(),
                })
                .collect(),
        }
    }
}
