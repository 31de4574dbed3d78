//! Broker liveness, KRaft's `BrokerHeartbeatManager` idea: every broker heartbeats the
//! metadata leader (the controller) every `broker.heartbeat.interval.ms`; heartbeats are
//! not logged. The controller keeps the last heartbeat of each broker in memory and
//! proposes `FenceBroker` for a registered, unfenced broker silent for longer than
//! `broker.session.timeout.ms`, and `UnfenceBroker` when a fenced broker heartbeats again
//! with its current epoch and has caught up with the metadata log. A controller that has
//! just gained leadership gives every broker a fresh grace period (it has no history).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::image::MetadataImage;

/// `broker_epoch` of a heartbeat that only asks whether a registration would clash with a
/// live broker of the same id (real epochs are log indexes, never 0).
pub const REGISTRATION_PROBE: u64 = 0;

/// What a broker sends to the controller (KRaft's BrokerHeartbeatRequest, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub broker_id: i32,
    /// This process's random id (changes on every start).
    #[serde(default)]
    pub incarnation_id: Uuid,
    /// The epoch of the registration the broker believes is current (the raft log index of
    /// its `RegisterBroker` entry), or [`REGISTRATION_PROBE`].
    pub broker_epoch: u64,
    /// The metadata this broker has applied (its image's applied index): a broker is
    /// unfenced only once it has caught up with its own registration.
    pub applied_index: u64,
    /// SIGTERM: the broker wants to stop (controlled shutdown).
    pub want_shutdown: bool,
}

/// The controller's answer (KRaft's BrokerHeartbeatResponse, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// The broker is fenced as far as the committed metadata says.
    pub fenced: bool,
    /// The broker's epoch is not the registered one: it must register again.
    pub stale_epoch: bool,
    /// Controlled shutdown is complete (the broker leads nothing); it may exit.
    pub should_shutdown: bool,
    /// Answer to a [`REGISTRATION_PROBE`]: another live process holds this broker id
    /// (Kafka's DUPLICATE_BROKER_REGISTRATION).
    #[serde(default)]
    pub duplicate: bool,
}

/// How long after its last attached connection closed a silent broker is fenced: time for
/// a broker whose connection merely broke to attach again (`network/attach.rs` retries
/// sooner than this) or heartbeat. Every millisecond here is a millisecond without a leader
/// for the partitions the dead broker led, hence short; the controller wakes for it
/// ([`Liveness::detached`]) rather than waiting for its periodic tick.
pub const DETACH_GRACE: Duration = Duration::from_millis(100);

struct Session {
    incarnation_id: Uuid,
    broker_epoch: u64,
    last_seen: Instant,
}

/// A broker's attached connections (`network/attach.rs`) as this voter sees them.
struct Attachment {
    broker_epoch: u64,
    open: usize,
    /// When the last open one closed.
    closed_at: Option<Instant>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<i32, Session>,
    attachments: HashMap<i32, Attachment>,
    /// Fenced brokers that heartbeat while caught up: the controller unfences them.
    unfence_wanted: BTreeMap<i32, u64>,
    /// When this node last became leader: every broker's session counts from there at
    /// the earliest (a new controller has no heartbeat history).
    leader_since: Option<Instant>,
}

/// The controller's memory of heartbeats. Owned by the quorum; only the leader's is used.
/// The mutex is never held across `.await`.
pub struct Liveness {
    session_timeout: Duration,
    state: Mutex<State>,
    /// Signalled when a broker's last attached connection closes (a permit is kept when
    /// nobody waits, so no close is missed).
    detached: tokio::sync::Notify,
}

impl Liveness {
    pub fn new(session_timeout: Duration) -> Self {
        Liveness {
            session_timeout,
            state: Mutex::new(State::default()),
            detached: tokio::sync::Notify::new(),
        }
    }

    /// Resolves once some broker's last attached connection has closed since the previous
    /// call: the controller then looks again as soon as [`DETACH_GRACE`] has passed.
    pub async fn detached(&self) {
        self.detached.notified().await
    }

    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the maps inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a heartbeat received by the leader and answers it from `image`.
    pub fn on_heartbeat(
        &self,
        hb: &Heartbeat,
        image: &MetadataImage,
        now: Instant,
    ) -> HeartbeatReply {
        let mut state = self.state();
        if hb.broker_epoch == REGISTRATION_PROBE {
            let duplicate = state.sessions.get(&hb.broker_id).is_some_and(|s| {
                s.incarnation_id != hb.incarnation_id
                    && now.saturating_duration_since(s.last_seen) < self.session_timeout
                    && image
                        .broker(hb.broker_id)
                        .is_some_and(|b| b.broker_epoch == s.broker_epoch && !b.fenced)
            });
            return HeartbeatReply {
                fenced: true,
                stale_epoch: false,
                should_shutdown: false,
                duplicate,
            };
        }
        state.sessions.insert(
            hb.broker_id,
            Session {
                incarnation_id: hb.incarnation_id,
                broker_epoch: hb.broker_epoch,
                last_seen: now,
            },
        );
        match image.broker(hb.broker_id) {
            Some(b) if b.broker_epoch == hb.broker_epoch => {
                if b.fenced
                    && !b.in_controlled_shutdown
                    && !hb.want_shutdown
                    && hb.applied_index >= b.broker_epoch
                {
                    state.unfence_wanted.insert(hb.broker_id, hb.broker_epoch);
                }
                HeartbeatReply {
                    fenced: b.fenced,
                    stale_epoch: false,
                    should_shutdown: b.in_controlled_shutdown,
                    duplicate: false,
                }
            }
            // Not registered, or registered by a newer incarnation (or not yet applied here).
            other => HeartbeatReply {
                fenced: true,
                stale_epoch: other.is_some_and(|b| b.broker_epoch > hb.broker_epoch),
                should_shutdown: false,
                duplicate: false,
            },
        }
    }

    /// A broker process attached a connection to this voter.
    pub fn attach(&self, broker_id: i32, broker_epoch: u64) {
        let mut state = self.state();
        let a = state.attachments.entry(broker_id).or_insert(Attachment {
            broker_epoch,
            open: 0,
            closed_at: None,
        });
        if a.broker_epoch != broker_epoch {
            *a = Attachment {
                broker_epoch,
                open: 0,
                closed_at: None,
            };
        }
        a.open += 1;
        a.closed_at = None;
    }

    /// An attached connection of the broker closed at `now`.
    pub fn detach(&self, broker_id: i32, broker_epoch: u64, now: Instant) {
        let mut state = self.state();
        if let Some(a) = state.attachments.get_mut(&broker_id) {
            if a.broker_epoch == broker_epoch {
                a.open = a.open.saturating_sub(1);
                if a.open == 0 {
                    a.closed_at = Some(now);
                    self.detached.notify_one();
                }
            }
        }
    }

    /// What the controller should propose now (called by the leader only): brokers to
    /// fence (active, silent longer than the session timeout, counted from this node's
    /// leadership at the earliest) and brokers to unfence.
    pub fn due(&self, image: &MetadataImage, now: Instant) -> Due {
        let mut state = self.state();
        let since = *state.leader_since.get_or_insert(now);
        let mut due = Due::default();
        for b in image.active_brokers() {
            let last = state
                .sessions
                .get(&b.broker_id)
                .filter(|s| s.broker_epoch == b.broker_epoch)
                .map_or(since, |s| s.last_seen.max(since));
            // A broker whose every attached connection closed, and that has not
            // heartbeated since, is gone (its process died): no need to wait out the session.
            let detached = state.attachments.get(&b.broker_id).is_some_and(|a| {
                a.broker_epoch == b.broker_epoch
                    && a.open == 0
                    && a.closed_at.is_some_and(|closed| {
                        now.saturating_duration_since(closed) >= DETACH_GRACE
                            && state
                                .sessions
                                .get(&b.broker_id)
                                .is_none_or(|s| s.last_seen < closed)
                    })
            });
            if detached || now.saturating_duration_since(last) > self.session_timeout {
                due.fence.push((b.broker_id, b.broker_epoch));
            }
        }
        for (broker_id, epoch) in std::mem::take(&mut state.unfence_wanted) {
            if image
                .broker(broker_id)
                .is_some_and(|b| b.broker_epoch == epoch && b.fenced && !b.in_controlled_shutdown)
            {
                due.unfence.push((broker_id, epoch));
            }
        }
        due
    }

    /// This node is not (or no longer) the leader: forget the leadership start, so the
    /// next leadership grants a fresh grace period.
    pub fn lost_leadership(&self) {
        let mut state = self.state();
        state.leader_since = None;
        state.unfence_wanted.clear();
    }
}

/// Broker fencing work for the controller: `(broker_id, broker_epoch)` pairs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    pub fence: Vec<(i32, u64)>,
    pub unfence: Vec<(i32, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::BrokerRegistration;

    fn image_with(broker_epoch: u64, fenced: bool) -> MetadataImage {
        let mut image = MetadataImage::default();
        image.brokers.insert(
            1,
            BrokerRegistration {
                broker_id: 1,
                host: "h".into(),
                port: 1,
                listeners: Vec::new(),
                rack: None,
                incarnation_id: Uuid::from_u128(1),
                broker_epoch,
                fenced,
                in_controlled_shutdown: false,
            },
        );
        image
    }

    fn hb(epoch: u64, incarnation: u128) -> Heartbeat {
        Heartbeat {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(incarnation),
            broker_epoch: epoch,
            applied_index: 10,
            want_shutdown: false,
        }
    }

    #[test]
    fn a_silent_broker_is_due_for_fencing_only_after_the_session_timeout() {
        let live = Liveness::new(Duration::from_secs(6));
        let image = image_with(5, false);
        let t0 = Instant::now();
        assert_eq!(live.due(&image, t0), Due::default());
        live.on_heartbeat(&hb(5, 1), &image, t0 + Duration::from_secs(4));
        assert!(live
            .due(&image, t0 + Duration::from_secs(9))
            .fence
            .is_empty());
        assert_eq!(
            live.due(&image, t0 + Duration::from_secs(11)).fence,
            vec![(1, 5)]
        );
    }

    #[test]
    fn a_caught_up_fenced_broker_is_unfenced_and_a_live_id_cannot_be_registered_twice() {
        let live = Liveness::new(Duration::from_secs(6));
        let t0 = Instant::now();
        let reply = live.on_heartbeat(&hb(5, 1), &image_with(5, true), t0);
        assert!(reply.fenced && !reply.stale_epoch);
        assert_eq!(live.due(&image_with(5, true), t0).unfence, vec![(1, 5)]);
        let unfenced = image_with(5, false);
        let probe = live.on_heartbeat(&hb(REGISTRATION_PROBE, 2), &unfenced, t0);
        assert!(probe.duplicate);
        let later = t0 + Duration::from_secs(7);
        assert!(
            !live
                .on_heartbeat(&hb(REGISTRATION_PROBE, 2), &unfenced, later)
                .duplicate
        );
        // The old process heartbeating after a newer registration learns it is stale.
        assert!(live.on_heartbeat(&hb(3, 1), &unfenced, later).stale_epoch);
    }

    #[test]
    fn a_broker_whose_attached_connections_all_closed_is_fenced_after_the_grace_only_if_silent_since(
    ) {
        let live = Liveness::new(Duration::from_secs(6));
        let image = image_with(5, false);
        let t0 = Instant::now();
        live.on_heartbeat(&hb(5, 1), &image, t0);
        live.attach(1, 5);
        live.attach(1, 5);
        live.detach(1, 5, t0 + Duration::from_millis(10));
        assert!(
            live.due(&image, t0 + Duration::from_secs(1))
                .fence
                .is_empty(),
            "one still open"
        );
        live.detach(1, 5, t0 + Duration::from_millis(20));
        assert!(
            live.due(&image, t0 + Duration::from_millis(100))
                .fence
                .is_empty(),
            "within the grace"
        );
        assert_eq!(
            live.due(&image, t0 + Duration::from_millis(400)).fence,
            vec![(1, 5)]
        );
        // A heartbeat after the close shows the process alive (only its connection broke).
        live.on_heartbeat(&hb(5, 1), &image, t0 + Duration::from_millis(200));
        assert!(live
            .due(&image, t0 + Duration::from_millis(400))
            .fence
            .is_empty());
        // The close of the last attachment wakes the controller (a permit waits for it).
        live.attach(1, 5);
        live.detach(1, 5, t0 + Duration::from_millis(500));
        let woken = ready_now(live.detached());
        assert!(woken, "the controller is woken by the close");
        // Closes of another epoch's attachments say nothing about this registration.
        live.attach(1, 4);
        live.detach(1, 4, t0 + Duration::from_millis(300));
        assert!(live
            .due(&image, t0 + Duration::from_secs(1))
            .fence
            .is_empty());
    }

    /// Polls `f` once: whether it is already ready.
    fn ready_now(f: impl std::future::Future<Output = ()>) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        std::pin::pin!(f).as_mut().poll(&mut cx).is_ready()
    }
}
