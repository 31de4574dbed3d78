//! `request_percentage` (KIP-124): the time a broker spends handling a user's / client id's
//! requests, as a percentage of one thread over the quota window (Kafka's
//! `ClientRequestQuotaManager`: each request records its handler-thread nanoseconds × 100 /
//! 10⁹, so 100 is one thread busy all the time). Past it, the response carries
//! `throttle_time_ms` — at most one window (1 s), as Kafka bounds it — and the connection
//! reads nothing for that long (KIP-219). A Fetch throttled this way returns no data, as a
//! bandwidth-throttled one (`enforce`).
//!
//! Brook has no handler threads: a request's time is the time spent polling its handler
//! ([`Timed`]), which leaves out waits (a long-polling fetch, acks=all) as Kafka's
//! purgatory leaves them out, and also the blocking threads' share of an append.
//!
//! Exempt, as Kafka exempts them (`sendResponseExemptThrottle`): a follower's fetch and the
//! cluster-action APIs brokers and controllers send each other.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use brook_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

/// Kafka's `NanosToPercentagePerSecond`.
const PERCENT_PER_NANO: f64 = 100.0 / 1e9;

/// The value a request's handling time records against `request_percentage`.
pub fn percentage(busy: Duration) -> f64 {
    busy.as_nanos() as f64 * PERCENT_PER_NANO
}

/// Whether a request is left out of the request quota (Kafka's `clusterAction` APIs, and a
/// follower's Fetch).
pub fn exempt(api_key: ApiKey, body: &RequestKind) -> bool {
    match body {
        RequestKind::Fetch(req) => req.replica_id.0 >= 0 || req.replica_state.replica_id.0 >= 0,
        _ => matches!(
            api_key,
            ApiKey::WriteTxnMarkers
                | ApiKey::AlterPartition
                | ApiKey::Vote
                | ApiKey::BeginQuorumEpoch
                | ApiKey::EndQuorumEpoch
                | ApiKey::FetchSnapshot
                | ApiKey::Envelope
                | ApiKey::BrokerRegistration
                | ApiKey::BrokerHeartbeat
                | ApiKey::AllocateProducerIds
        ),
    }
}

/// A pinned future and the time spent polling it: the request's handling time on the
/// runtime's threads. Measured only when `measure` (a request quota is configured); no
/// allocation either way (the caller pins the future on its stack).
pub struct Timed<'a, F> {
    inner: Pin<&'a mut F>,
    measure: bool,
    busy: Duration,
}

impl<'a, F: Future> Timed<'a, F> {
    pub fn new(inner: Pin<&'a mut F>, measure: bool) -> Self {
        Timed {
            inner,
            measure,
            busy: Duration::ZERO,
        }
    }
}

impl<F: Future> Future for Timed<'_, F> {
    type Output = (F::Output, Duration);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Timed` is `Unpin`: it holds only a pinned reference.
        let this = self.get_mut();
        let started = this.measure.then(Instant::now);
        let polled = this.inner.as_mut().poll(cx);
        if let Some(started) = started {
            this.busy += started.elapsed();
        }
        polled.map(|output| (output, this.busy))
    }
}

/// Puts `ms` in a response's `throttle_time_ms` unless it already holds a longer one;
/// false for the few responses without the field.
pub fn set_throttle_time(body: &mut ResponseKind, ms: i32) -> bool {
    macro_rules! throttled {
        ($($api:ident),* $(,)?) => {
            match body {
                $(ResponseKind::$api(r) => {
                    r.throttle_time_ms = r.throttle_time_ms.max(ms);
                    true
                })*
                _ => false,
            }
        };
    }
    throttled!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeConfigs,
        AlterConfigs,
        DescribeLogDirs,
        AlterReplicaLogDirs,
        CreatePartitions,
        DeleteGroups,
        ElectLeaders,
        IncrementalAlterConfigs,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        OffsetDelete,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeCluster,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
    )
}

#[cfg(test)]
mod tests {
    use brook_protocol::kafka_protocol::messages::{
        FetchRequest, MetadataResponse, ProduceRequest, SaslHandshakeResponse,
    };

    use super::*;

    #[test]
    fn one_thread_busy_for_a_second_is_a_hundred_percent() {
        assert!((percentage(Duration::from_secs(1)) - 100.0).abs() < 1e-9);
        assert!((percentage(Duration::from_millis(5)) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_followers_fetch_and_cluster_actions_are_exempt_a_clients_requests_are_not() {
        let follower = FetchRequest::default().with_replica_id(1.into());
        assert!(exempt(ApiKey::Fetch, &RequestKind::Fetch(follower)));
        let consumer = FetchRequest::default().with_replica_id((-1).into());
        assert!(!exempt(ApiKey::Fetch, &RequestKind::Fetch(consumer)));
        let produce = RequestKind::Produce(ProduceRequest::default());
        assert!(!exempt(ApiKey::Produce, &produce));
        assert!(exempt(ApiKey::WriteTxnMarkers, &produce));
    }

    #[test]
    fn the_longer_throttle_is_kept_and_responses_without_the_field_say_so() {
        let mut body =
            ResponseKind::Metadata(MetadataResponse::default().with_throttle_time_ms(700));
        assert!(set_throttle_time(&mut body, 300));
        assert!(set_throttle_time(&mut body, 900));
        let ResponseKind::Metadata(r) = body else {
            unreachable!()
        };
        assert_eq!(r.throttle_time_ms, 900);
        let mut sasl = ResponseKind::SaslHandshake(SaslHandshakeResponse::default());
        assert!(!set_throttle_time(&mut sasl, 300));
    }

    #[tokio::test]
    async fn a_timed_future_counts_its_polls_not_its_waits() {
        let sleeper = std::pin::pin!(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            7
        });
        let (out, busy) = Timed::new(sleeper, true).await;
        assert_eq!(out, 7);
        assert!(busy < Duration::from_millis(20), "{busy:?}");
        let (_, unmeasured) = Timed::new(std::pin::pin!(async {}), false).await;
        assert_eq!(unmeasured, Duration::ZERO);
    }
}
