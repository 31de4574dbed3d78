//! The transaction state machine of one transactional id (Kafka's `TransactionState` and
//! `TransactionMetadata`, Transactions V1).
//!
//! States: Empty → Ongoing (AddPartitions/AddOffsets) → PrepareCommit | PrepareAbort
//! (EndTxn, or a fence/timeout abort) → CompleteCommit | CompleteAbort (markers written)
//! → Ongoing again or Empty (InitProducerId); Dead when an idle id expires.
//! PrepareEpochFence is never written: an InitProducerId or the timeout sweep hitting an
//! Ongoing transaction bumps the epoch and goes straight to PrepareAbort (Kafka does the
//! same two steps under one lock).
//!
//! Transactions V2 (KIP-890 part 2; the id's `client_version` is 2 once a V2 client's
//! request touched it): EndTxn bumps the epoch of every transaction, so the markers carry
//! the bumped epoch and a late write of transaction N cannot join N+1; a retried EndTxn
//! names the epoch before the bump; an abort is accepted from Empty and Complete* (the
//! client may not know the transaction ended); an exhausted epoch hands over to a new
//! producer id once the markers are written (`next_producer_id`).
//!
//! A change is two-phase, as in Kafka: `prepare_*` validates, sets `pending` and returns a
//! [`Transit`] (what the log record will say); the caller writes it to
//! `__transaction_state`, then [`TxnMetadata::complete`] applies it or
//! [`TxnMetadata::abandon`] forgets it. While `pending` is set every other change answers
//! CONCURRENT_TRANSACTIONS, so no two writes of one id race.
//!
//! Pure: no I/O, no clock (callers pass `now_ms`).

use std::collections::BTreeSet;

use super::records::{TxnLogValue, TRANSACTION_VERSION_2};
use super::TxnError;

/// No producer id / epoch (Kafka's `RecordBatch.NO_PRODUCER_ID` / `NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

pub type TopicPartition = (String, i32);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The `TransactionStatus` byte of the log record.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The name DescribeTransactions / ListTransactions show (Kafka's `TransactionState.name`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states this one may follow (Kafka's `validPreviousStates`; an abort from Empty
    /// or Complete* only happens for Transactions V2 clients).
    fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteCommit, CompleteAbort],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether an idle id in this state may expire (`isExpirationAllowed`).
    pub fn expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// Prepare* states: markers still have to be written.
    pub fn is_prepared(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// Kafka's `TransactionMetadata.isEpochExhausted`: one epoch is kept in reserve for a fence.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A change about to be written; becomes the metadata once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transit {
    pub producer_id: i64,
    pub last_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub start_timestamp_ms: i64,
    pub last_update_timestamp_ms: i64,
    pub next_producer_id: i64,
    pub client_version: i16,
}

impl Transit {
    /// The log record of this change.
    pub fn log_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            last_update_timestamp_ms: self.last_update_timestamp_ms,
            start_timestamp_ms: self.start_timestamp_ms,
            previous_producer_id: self.last_producer_id,
            next_producer_id: self.next_producer_id,
            client_version: self.client_version,
        }
    }
}

/// What InitProducerId does with a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// Write this (Empty, with the new epoch or producer id) and answer with it.
    Write(Transit),
    /// An open transaction must be aborted first (the epoch is bumped to fence its
    /// producer): write this PrepareAbort, complete it, answer CONCURRENT_TRANSACTIONS.
    FenceAndAbort(Transit),
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndStep {
    /// Already completed with this outcome (a retry): answer success with the current
    /// producer id and epoch.
    AlreadyDone,
    /// Write this Prepare* record, then write the markers and complete.
    Write(Transit),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub last_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the current transaction started (-1: none).
    pub start_timestamp_ms: i64,
    pub last_update_timestamp_ms: i64,
    /// The state a written-but-not-yet-applied change leads to.
    pub pending: Option<TxnState>,
    /// A fence's bumped epoch may not have reached the log; do not bump again (Kafka's
    /// `hasFailedEpochFence`: that epoch was never handed out).
    pub failed_epoch_fence: bool,
    /// The producer id a Transactions V2 end with an exhausted epoch hands over to (-1: none).
    pub next_producer_id: i64,
    /// The transaction version of the client's last request (Kafka's
    /// `clientTransactionVersion`): 2 = Transactions V2.
    pub client_version: i16,
}

impl TxnMetadata {
    /// A new id: Empty, with a fresh producer id and no epoch yet.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id,
            last_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_timestamp_ms: -1,
            last_update_timestamp_ms: now_ms,
            pending: None,
            failed_epoch_fence: false,
            next_producer_id: NO_PRODUCER_ID,
            client_version: 0,
        }
    }

    /// The metadata a log record describes (the last epoch is not in the record).
    pub fn from_log(transactional_id: &str, value: &TxnLogValue) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id: value.producer_id,
            last_producer_id: value.previous_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms: value.timeout_ms,
            state: value.state,
            partitions: value.partitions.clone(),
            start_timestamp_ms: value.start_timestamp_ms,
            last_update_timestamp_ms: value.last_update_timestamp_ms,
            pending: None,
            failed_epoch_fence: false,
            next_producer_id: value.next_producer_id,
            client_version: value.client_version,
        }
    }

    /// Kafka's `pendingTransitionInProgress`: a write of this id is in flight, or its
    /// markers are being written (Kafka holds the pending Complete* state while it sends
    /// them). Client requests then answer CONCURRENT_TRANSACTIONS before any producer id
    /// or epoch check, so a producer that ends or starts its next transaction while the
    /// previous one's markers are still out retries instead of being told it is fenced.
    pub fn transition_in_progress(&self) -> bool {
        self.pending.is_some() || self.state.is_prepared()
    }

    /// Whether the id's last request came from a Transactions V2 client.
    pub fn is_v2(&self) -> bool {
        self.client_version >= TRANSACTION_VERSION_2
    }

    fn transit(&mut self, state: TxnState) -> Transit {
        self.pending = Some(state);
        Transit {
            producer_id: self.producer_id,
            last_producer_id: self.last_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            timeout_ms: self.timeout_ms,
            state,
            partitions: self.partitions.clone(),
            start_timestamp_ms: self.start_timestamp_ms,
            last_update_timestamp_ms: self.last_update_timestamp_ms,
            next_producer_id: self.next_producer_id,
            client_version: self.client_version,
        }
    }

    /// Whether InitProducerId must hand out a new producer id: the epoch is exhausted
    /// (and the caller, if it names an epoch, holds the current one). The caller allocates
    /// it before [`Self::prepare_init`], which takes no `await`.
    pub fn needs_new_producer_id(&self, expected: Option<(i64, i16)>) -> bool {
        matches!(
            self.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) && self.pending.is_none()
            && epoch_exhausted(self.producer_epoch)
            && expected.is_none_or(|(_, epoch)| epoch == self.producer_epoch)
    }

    /// InitProducerId (Kafka's `prepareInitProducerIdTransit`). `expected` is the
    /// request's producer id and epoch when it names them (KIP-360 re-initialisation);
    /// `new_producer_id` is the id allocated when [`Self::needs_new_producer_id`] said so.
    pub fn prepare_init(
        &mut self,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<InitStep, TxnError> {
        if self.transition_in_progress() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if let Some((pid, epoch)) = expected {
            // A retry after an epoch bump the producer never heard of names the previous
            // id with the exhausted epoch.
            let valid = self.producer_epoch == NO_PRODUCER_EPOCH
                || pid == self.producer_id
                || (pid == self.last_producer_id && epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if self.needs_new_producer_id(expected) {
                    let Some(new_pid) = new_producer_id else {
                        // Allocated for another state: the client retries.
                        return Err(TxnError::ConcurrentTransactions);
                    };
                    let last_epoch = if expected.is_some() {
                        self.producer_epoch
                    } else {
                        NO_PRODUCER_EPOCH
                    };
                    let mut t = self.transit(TxnState::Empty);
                    t.last_producer_id = self.producer_id;
                    t.producer_id = new_pid;
                    t.producer_epoch = 0;
                    t.last_producer_epoch = last_epoch;
                    return Ok(InitStep::Write(self.reset(t, timeout_ms, now_ms)));
                }
                let bumped = self.producer_epoch.saturating_add(1);
                let (epoch, last_epoch) = match expected {
                    None => (bumped, NO_PRODUCER_EPOCH),
                    Some((_, e))
                        if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch =>
                    {
                        (bumped, self.producer_epoch)
                    }
                    // A retry of a bump that succeeded: answer the current epoch again.
                    Some((_, e)) if e == self.last_producer_epoch => {
                        (self.producer_epoch, self.last_producer_epoch)
                    }
                    Some(_) => return Err(TxnError::ProducerFenced),
                };
                let mut t = self.transit(TxnState::Empty);
                t.producer_epoch = epoch;
                t.last_producer_epoch = last_epoch;
                Ok(InitStep::Write(self.reset(t, timeout_ms, now_ms)))
            }
            TxnState::Ongoing => self
                .prepare_fence_abort(now_ms)
                .map(InitStep::FenceAndAbort),
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::ConcurrentTransactions),
        }
    }

    /// An Empty transit's common fields: no partitions, no start, the new timeout.
    fn reset(&self, mut t: Transit, timeout_ms: i32, now_ms: i64) -> Transit {
        t.timeout_ms = timeout_ms;
        t.partitions.clear();
        t.start_timestamp_ms = -1;
        t.last_update_timestamp_ms = now_ms;
        t
    }

    /// Fences the producer of the Ongoing transaction (epoch + 1, never handed out) and
    /// aborts its transaction: PrepareEpochFence then PrepareAbort, as Kafka's
    /// `prepareFenceProducerEpoch` + `endTransaction(isFromClient = false)`.
    pub fn prepare_fence_abort(&mut self, now_ms: i64) -> Result<Transit, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if self.state != TxnState::Ongoing {
            return Err(TxnError::InvalidTxnState);
        }
        let bumped = if self.failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch
                .checked_add(1)
                .ok_or(TxnError::ProducerFenced)?
        };
        self.producer_epoch = bumped;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        // One bump, also for Transactions V2: the timed-out producer's late EndTxn then
        // looks like a retry of this abort, so its commit gets INVALID_TXN_STATE and its
        // abort succeeds, as Kafka 4.4 answers.
        let mut t = self.transit(TxnState::PrepareAbort);
        t.last_update_timestamp_ms = now_ms;
        Ok(t)
    }

    /// The producer id and epoch of a client request must be the current ones.
    fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if self.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if self.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn, or a partition leader adding a partition for
    /// a Transactions V2 client (`client_version` 2). `Ok(None)`: already in the transaction.
    pub fn prepare_add_partitions(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        client_version: i16,
        now_ms: i64,
    ) -> Result<Option<Transit>, TxnError> {
        self.check_producer(producer_id, producer_epoch)?;
        if self.transition_in_progress() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if matches!(self.state, TxnState::Dead | TxnState::PrepareEpochFence) {
            return Err(TxnError::ConcurrentTransactions);
        }
        if self.state == TxnState::Ongoing && partitions.is_subset(&self.partitions) {
            return Ok(None);
        }
        let starts = matches!(
            self.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        );
        let mut t = self.transit(TxnState::Ongoing);
        if starts {
            t.partitions.clear();
            t.start_timestamp_ms = now_ms;
        }
        t.partitions.extend(partitions.iter().cloned());
        t.last_update_timestamp_ms = now_ms;
        t.client_version = client_version;
        Ok(Some(t))
    }

    /// The partitions of this producer's Ongoing transaction, none outside one (the v4+
    /// `VerifyOnly` form of AddPartitionsToTxn, Kafka's `handleVerifyPartitionsInTransaction`).
    pub fn verify_partitions(
        &self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<BTreeSet<TopicPartition>, TxnError> {
        self.check_producer(producer_id, producer_epoch)?;
        if self.transition_in_progress() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if self.state != TxnState::Ongoing {
            return Ok(BTreeSet::new());
        }
        Ok(self.partitions.clone())
    }

    /// Whether EndTxn of a Transactions V2 client must hand out a new producer id: its
    /// bump would exhaust the epoch. The caller allocates it before [`Self::prepare_end`].
    pub fn end_needs_new_producer_id(&self, client_version: i16) -> bool {
        client_version >= TRANSACTION_VERSION_2
            && self.pending.is_none()
            && epoch_exhausted(self.producer_epoch)
    }

    /// EndTxn from the client (Kafka's `endTransaction(isFromClient = true)`).
    /// `client_version` 2 (EndTxn v5) bumps the epoch; `new_producer_id` is the id
    /// allocated when [`Self::end_needs_new_producer_id`] said so.
    pub fn prepare_end(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_version: i16,
        new_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<EndStep, TxnError> {
        // First, as Kafka's `endTransaction` does: while the previous end's markers are
        // out, the producer's next EndTxn (say, the abort of a transaction it has just
        // begun, at the epoch the commit handed out) waits for them instead of failing
        // the epoch checks below against a Prepare* state.
        if self.transition_in_progress() {
            return Err(TxnError::ConcurrentTransactions);
        }
        // Transactions V2: the same epoch is the next transaction's; a retry names the
        // epoch before the bump (or, after a handover to a new producer id, the old id's
        // last epoch).
        let v2 = self.is_v2();
        let retry_after_bump =
            v2 && i32::from(self.producer_epoch) == i32::from(producer_epoch) + 1;
        let retry_after_handover = v2
            && self.last_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && self.producer_epoch == 0;
        let retry = retry_after_bump || retry_after_handover;
        if self.producer_id != producer_id && !retry_after_handover {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let valid_epoch = if v2 {
            match self.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => retry_after_bump,
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    retry || producer_epoch == self.producer_epoch
                }
                _ => producer_epoch == self.producer_epoch,
            }
        } else {
            producer_epoch == self.producer_epoch
        };
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let bumps = client_version >= TRANSACTION_VERSION_2;
        let next = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                self.prepare_end_write(next, bumps, client_version, new_producer_id, now_ms)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if !v2 || retry => {
                Ok(EndStep::AlreadyDone)
            }
            // Transactions V2: the client may not know its transaction ended (or never
            // started one the coordinator heard of): an abort is written anyway, bumping
            // the epoch, with no partitions to mark.
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false)
                if bumps && !retry =>
            {
                self.prepare_end_write(next, bumps, client_version, new_producer_id, now_ms)
                    .map(|step| match step {
                        EndStep::Write(mut t) => {
                            t.partitions.clear();
                            EndStep::Write(t)
                        }
                        other => other,
                    })
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            (TxnState::Dead | TxnState::PrepareEpochFence, _) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The Prepare* transit of an end; with `bump` (Transactions V2) at the next epoch,
    /// handing over to `new_producer_id` when the epoch runs out.
    fn prepare_end_write(
        &mut self,
        next: TxnState,
        bump: bool,
        client_version: i16,
        new_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<EndStep, TxnError> {
        let handover = bump && epoch_exhausted(self.producer_epoch);
        if handover && new_producer_id.is_none() {
            // Allocated for another state: the client retries.
            return Err(TxnError::ConcurrentTransactions);
        }
        let mut t = self.transit(next);
        if bump {
            t.last_producer_epoch = self.producer_epoch;
            t.producer_epoch = self.producer_epoch.saturating_add(1);
            t.next_producer_id = if handover {
                new_producer_id.unwrap_or(NO_PRODUCER_ID)
            } else {
                NO_PRODUCER_ID
            };
        }
        if self.state != TxnState::Ongoing {
            t.start_timestamp_ms = now_ms;
        }
        t.client_version = client_version;
        t.last_update_timestamp_ms = now_ms;
        Ok(EndStep::Write(t))
    }

    /// The producer id and epoch an EndTxn v5 answer hands the client: the next
    /// transaction's (after a handover, the new id at epoch 0).
    pub fn next_transaction_producer(&self) -> (i64, i16) {
        if self.is_v2() && self.next_producer_id != NO_PRODUCER_ID {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }

    /// After the markers of a Prepare* transaction are written: Complete*, no partitions.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<Transit, TxnError> {
        let next = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return Err(TxnError::InvalidTxnState),
        };
        let mut t = self.transit(next);
        t.partitions.clear();
        t.last_update_timestamp_ms = now_ms;
        if self.is_v2() && self.next_producer_id != NO_PRODUCER_ID {
            // The markers (at the old id's last epoch) are written: hand over.
            t.last_producer_id = self.producer_id;
            t.last_producer_epoch = self.producer_epoch;
            t.producer_id = self.next_producer_id;
            t.producer_epoch = 0;
            t.next_producer_id = NO_PRODUCER_ID;
        }
        Ok(t)
    }

    /// Expiry of an idle id (written as a tombstone).
    pub fn prepare_dead(&mut self) -> Result<Transit, TxnError> {
        if self.pending.is_some() || !self.state.expiration_allowed() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let mut t = self.transit(TxnState::Dead);
        t.partitions.clear();
        Ok(t)
    }

    /// Applies a written transit (Kafka's `completeTransitionTo`). A transit that does not
    /// follow from the current state is refused and forgotten.
    pub fn complete(&mut self, t: Transit) -> Result<(), TxnError> {
        let expected = self.pending.take();
        if expected != Some(t.state) || !t.state.valid_previous().contains(&self.state) {
            return Err(TxnError::InvalidTxnState);
        }
        self.producer_id = t.producer_id;
        self.last_producer_id = t.last_producer_id;
        self.producer_epoch = t.producer_epoch;
        self.last_producer_epoch = t.last_producer_epoch;
        self.timeout_ms = t.timeout_ms;
        self.state = t.state;
        self.partitions = t.partitions;
        self.start_timestamp_ms = t.start_timestamp_ms;
        self.last_update_timestamp_ms = t.last_update_timestamp_ms;
        self.next_producer_id = t.next_producer_id;
        self.client_version = t.client_version;
        if matches!(t.state, TxnState::CompleteCommit | TxnState::CompleteAbort) {
            self.failed_epoch_fence = false;
        }
        Ok(())
    }

    /// The write of the pending transit failed: nothing changes, except that a fence
    /// (`fence`: the transit came from [`Self::prepare_fence_abort`]) remembers that its
    /// bumped epoch may not be in the log, so the next fence does not bump again.
    pub fn abandon(&mut self, fence: bool) {
        self.pending = None;
        if fence {
            self.failed_epoch_fence = true;
        }
    }

    /// An Ongoing transaction past its timeout (Kafka's `timedOutTransactions`).
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.pending.is_none()
            && self.start_timestamp_ms + i64::from(self.timeout_ms) < now_ms
    }

    /// An idle id past `transactional.id.expiration.ms`.
    pub fn expired(&self, now_ms: i64, expiration_ms: i64) -> bool {
        self.state.expiration_allowed()
            && self.pending.is_none()
            && self.last_update_timestamp_ms + expiration_ms <= now_ms
    }
}
