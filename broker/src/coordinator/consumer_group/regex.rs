//! Regex subscriptions of KIP-848 consumer groups (`SubscribedTopicRegex`, heartbeat v1):
//! the coordinator, not the client, turns a member's pattern into topic names, as Kafka's
//! `GroupMetadataManager` and `TopicRegexResolver` do. A pattern must match the whole topic
//! name (RE2/J's `Matcher.matches()`: `^topic` does not match `topic-1`), and every topic of
//! the metadata image is a candidate: Kafka 4.4 leaves internal topics such as
//! `__consumer_offsets` in (only a DESCRIBE ACL filter applies there), so Brook does too.
//!
//! With an authorizer, a pattern resolves only to the topics the principal of the heartbeat
//! that resolved it may DESCRIBE (Kafka 4.4's `TopicRegexResolver` filters with that
//! heartbeat's request context): a pattern is no way around the ACLs, neither to learn a
//! topic's existence nor to take its partitions from authorized members. The group keeps
//! that [`Caller`] for re-resolving at topic changes between heartbeats.
//!
//! When: at once for topics created or deleted, and at the first heartbeat after any other
//! metadata change (an ACL granted or removed). Kafka re-resolves for new topics and
//! otherwise every `group.consumer.regex.refresh.interval.ms` (an internal key, 10 min by
//! default), which a resolution never older than the metadata leaves nothing to do: Brook
//! accepts the key without effect.
//!
//! The group keeps one [`ResolvedRegex`] per distinct pattern its members use (the fields of
//! Kafka's `ConsumerGroupRegularExpression` record, type 16), evaluated once per pattern and
//! metadata version however many members share it; a member's subscription is its topic names
//! plus its pattern's topics. Pure logic, no locking: the caller holds the groups' lock.
//!
//! Kafka compiles patterns with RE2/J; Brook with Rust's `regex`, the same RE2 family. Where
//! the dialects differ:
//! - Refused like RE2/J although Rust accepts them (checked on the syntax tree here): stacked
//!   repetition operators (`a**`, `a+{2}`), a repeat count above 1000, and the flags `x`, `u`,
//!   `R` (RE2/J knows only `i`, `m`, `s`, `U`).
//! - Accepted by RE2/J, refused by Brook (with Rust's description of the error): `\Q…\E`,
//!   an unclosed counted repetition as a literal (`a{2`), group names starting with a digit
//!   (`(?P<1>a)`).
//! - Accepted by both, read differently: a class with `&&`, `--` or `~~` is a set operation
//!   in Rust and literal characters in RE2/J; an unknown `[[:name:]]` is refused by RE2/J and
//!   a nested class in Rust; `\<`, `\>` and `\b{start}` are word-boundary assertions in Rust
//!   and literals in RE2/J; `a{,3}` repeats in Rust and is a literal in RE2/J.
//! - `\d`, `\w`, `\s`, `\b` and `(?i)` are Unicode-aware in Rust and ASCII in RE2/J; topic
//!   names are ASCII letters, digits, `.`, `_` and `-` only, so the matches are the same.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use regex_syntax::ast::{self, Ast, Flag, FlagsItemKind, GroupKind, RepetitionKind};
use regex_syntax::hir;

use std::net::IpAddr;

use super::assignor::TopicMeta;
use super::group::ConsumerGroup;
use super::member::ConsumerMember;
use crate::error::GroupError;
use crate::server::session::KafkaPrincipal;

/// Whom a heartbeat comes from: the context a group's patterns are resolved with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: KafkaPrincipal,
    pub host: IpAddr,
}

impl Caller {
    /// An unauthenticated client on loopback (tests).
    #[cfg(test)]
    pub fn anonymous() -> Caller {
        Caller {
            principal: KafkaPrincipal::anonymous(),
            host: IpAddr::from([127, 0, 0, 1]),
        }
    }
}

/// The authorizer's answer to "may `caller` DESCRIBE `topic`" (true for all without one).
pub type MayDescribe<'a> = &'a (dyn Fn(&Caller, &str) -> bool + Sync);

/// The metadata a heartbeat or a topic change is handled against: the image's topics at
/// `version`, and who may see which of them.
#[derive(Clone, Copy)]
pub struct TopicsView<'a> {
    pub topics: &'a BTreeMap<String, TopicMeta>,
    pub version: i64,
    pub may_describe: MayDescribe<'a>,
}

impl<'a> TopicsView<'a> {
    /// Every topic visible to every caller: a broker without an authorizer.
    pub fn unrestricted(topics: &'a BTreeMap<String, TopicMeta>, version: i64) -> Self {
        fn everyone(_: &Caller, _: &str) -> bool {
            true
        }
        TopicsView {
            topics,
            version,
            may_describe: &everyone,
        }
    }
}

/// What one pattern resolved to: Kafka's `ConsumerGroupRegularExpressionValue` (type 16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRegex {
    /// The topics the pattern matched.
    pub topics: BTreeSet<String>,
    /// The metadata image it was evaluated against (its applied raft index; Kafka: the
    /// image's offset).
    pub version: i64,
    /// When it was evaluated (wall clock, ms).
    pub timestamp_ms: i64,
}

/// RE2's largest repeat count (`{n}`, `{n,m}`).
const MAX_REPEAT: u32 = 1000;

/// A pattern compiled for full-name matching.
#[derive(Debug, Clone)]
pub struct TopicRegex(Regex);

impl TopicRegex {
    /// Kafka's `Utils.throwIfRegularExpressionIsInvalid`: INVALID_REGULAR_EXPRESSION with
    /// Kafka's message and RE2/J's description of what is wrong where Brook knows it.
    pub fn compile(pattern: &str) -> Result<TopicRegex, GroupError> {
        let invalid = |description: String| GroupError::InvalidRegularExpression {
            pattern: pattern.to_owned(),
            description,
        };
        // The pattern is parsed on its own before it is wrapped, so that one like `a)|(b`
        // cannot escape the anchors.
        let tree = ast::parse::Parser::new()
            .parse(pattern)
            .map_err(|e| invalid(parse_description(pattern, &e)))?;
        ast::visit(&tree, Re2jOnly).map_err(|e| invalid(e.to_owned()))?;
        hir::translate::Translator::new()
            .translate(pattern, &tree)
            .map_err(|e| invalid(translate_description(e.kind())))?;
        // `\A…\z` rather than `^…$`: the same on a topic name, and no `(?m)` can turn them
        // into line anchors.
        Regex::new(&format!(r"\A(?:{pattern})\z"))
            .map(TopicRegex)
            .map_err(|e| invalid(e.to_string()))
    }

    /// Whether the pattern matches all of `topic`.
    pub fn matches(&self, topic: &str) -> bool {
        self.0.is_match(topic)
    }
}

/// The names in `topics` that `regex` matches and `visible` lets through.
pub fn resolve<'a>(
    regex: &TopicRegex,
    topics: impl IntoIterator<Item = &'a str>,
    visible: &dyn Fn(&str) -> bool,
) -> BTreeSet<String> {
    topics
        .into_iter()
        .filter(|t| regex.matches(t) && visible(t))
        .map(str::to_owned)
        .collect()
}

impl ConsumerGroup {
    /// Re-evaluates the group's patterns against `view` for `caller` (the heartbeat's
    /// sender, kept as the group's resolving context; `None`: the one kept, and nothing is
    /// evaluated before a heartbeat gave one): each distinct pattern once, and only those
    /// evaluated at another version. `new_pattern` is one a heartbeat is about to subscribe
    /// to: refused when invalid, before anything changes, else evaluated now. Patterns no
    /// member uses any more are dropped. Returns whether any pattern's topics changed for
    /// the members using it (the group epoch must then move so the assignment follows).
    pub fn refresh_regexes(
        &mut self,
        new_pattern: Option<&str>,
        caller: Option<&Caller>,
        view: &TopicsView<'_>,
        now_ms: i64,
    ) -> Result<bool, GroupError> {
        let mut fresh: BTreeMap<String, TopicRegex> = BTreeMap::new();
        if let Some(p) = new_pattern.filter(|p| !p.is_empty()) {
            if !self.resolved_regexes.contains_key(p) {
                fresh.insert(p.to_owned(), TopicRegex::compile(p)?);
            }
        }
        self.forget_unused_regexes(new_pattern);
        if let Some(caller) = caller {
            self.regex_caller = Some(caller.clone());
        }
        let Some(caller) = self.regex_caller.clone() else {
            return Ok(false);
        };
        let visible = |topic: &str| (view.may_describe)(&caller, topic);
        let version = view.version;
        let stale: Vec<String> = self
            .resolved_regexes
            .iter()
            .filter(|(_, r)| r.version != version)
            .map(|(p, _)| p.clone())
            .collect();
        let mut changed = false;
        let to_evaluate = stale.into_iter().filter_map(|p| {
            // Valid when it was first resolved, so it compiles again.
            let regex = TopicRegex::compile(&p).ok()?;
            Some((p, regex))
        });
        for (pattern, regex) in to_evaluate.chain(fresh) {
            let resolved = ResolvedRegex {
                topics: resolve(&regex, view.topics.keys().map(String::as_str), &visible),
                version,
                timestamp_ms: now_ms,
            };
            // A new pattern is the subscribing member's own change; a known one whose topics
            // moved changes the subscription of every member using it.
            if let Some(old) = self.resolved_regexes.insert(pattern, resolved.clone()) {
                changed |= old.topics != resolved.topics;
            }
        }
        Ok(changed)
    }

    /// The topics `member` subscribes to: its names and what its pattern resolved to.
    pub fn subscription(&self, member: &ConsumerMember) -> BTreeSet<String> {
        let mut topics: BTreeSet<String> = member.subscribed_topic_names.iter().cloned().collect();
        if let Some(resolved) = member
            .subscribed_topic_regex
            .as_ref()
            .and_then(|p| self.resolved_regexes.get(p))
        {
            topics.extend(resolved.topics.iter().cloned());
        }
        topics
    }

    /// Drops the resolutions of patterns no member (nor `keep`) subscribes to (Kafka writes
    /// a tombstone of their record).
    pub fn forget_unused_regexes(&mut self, keep: Option<&str>) {
        let used: BTreeSet<&str> = self
            .members
            .values()
            .filter_map(|m| m.subscribed_topic_regex.as_deref())
            .chain(keep)
            .collect();
        self.resolved_regexes
            .retain(|p, _| used.contains(p.as_str()));
    }
}

/// Refuses what Rust's parser accepts but RE2/J does not, with RE2/J's description.
struct Re2jOnly;

impl ast::Visitor for Re2jOnly {
    type Output = ();
    type Err = &'static str;

    fn finish(self) -> Result<(), &'static str> {
        Ok(())
    }

    fn visit_pre(&mut self, node: &Ast) -> Result<(), &'static str> {
        match node {
            Ast::Repetition(rep) => {
                if matches!(*rep.ast, Ast::Repetition(_)) {
                    return Err("invalid nested repetition operator");
                }
                if let RepetitionKind::Range(range) = &rep.op.kind {
                    let too_big = match *range {
                        ast::RepetitionRange::Exactly(n) | ast::RepetitionRange::AtLeast(n) => {
                            n > MAX_REPEAT
                        }
                        ast::RepetitionRange::Bounded(n, m) => n > MAX_REPEAT || m > MAX_REPEAT,
                    };
                    if too_big {
                        return Err("invalid repeat count");
                    }
                }
            }
            Ast::Flags(set) => check_flags(&set.flags)?,
            Ast::Group(group) => {
                if let GroupKind::NonCapturing(flags) = &group.kind {
                    check_flags(flags)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// RE2/J's flags are `i`, `m`, `s` and `U`.
fn check_flags(flags: &ast::Flags) -> Result<(), &'static str> {
    let unsupported = flags.items.iter().any(|item| {
        matches!(
            item.kind,
            FlagsItemKind::Flag(Flag::IgnoreWhitespace | Flag::Unicode | Flag::CRLF)
        )
    });
    if unsupported {
        Err("invalid or unsupported Perl syntax")
    } else {
        Ok(())
    }
}

/// RE2/J's `PatternSyntaxException.getDescription()` for a parse error, else Rust's words.
fn parse_description(pattern: &str, e: &ast::Error) -> String {
    use ast::ErrorKind as K;
    let re2j = match e.kind() {
        // A pattern ending in `(?` is an unfinished flag group to RE2/J.
        K::GroupUnclosed if pattern.get(e.span().start.offset..) == Some("(?") => {
            "invalid or unsupported Perl syntax"
        }
        K::GroupUnclosed => "missing closing )",
        // What RE2/J 1.8 answers to a `)` without its `(`.
        K::GroupUnopened => "regexp/syntax: internal error",
        K::ClassUnclosed => "missing closing ]",
        K::ClassRangeInvalid | K::ClassRangeLiteral | K::UnicodeClassInvalid => {
            "invalid character class range"
        }
        K::RepetitionMissing => "missing argument to repetition operator",
        K::RepetitionCountInvalid => "invalid repeat count",
        K::EscapeUnexpectedEof => "trailing backslash at end of expression",
        K::EscapeUnrecognized
        | K::EscapeHexEmpty
        | K::EscapeHexInvalid
        | K::EscapeHexInvalidDigit
        | K::ClassEscapeInvalid
        | K::UnsupportedBackreference => "invalid escape sequence",
        K::FlagUnrecognized
        | K::FlagUnexpectedEof
        | K::FlagDanglingNegation
        | K::FlagRepeatedNegation { .. }
        | K::FlagDuplicate { .. }
        | K::UnsupportedLookAround => "invalid or unsupported Perl syntax",
        K::GroupNameDuplicate { .. } => "duplicate capture group name",
        K::GroupNameEmpty | K::GroupNameInvalid | K::GroupNameUnexpectedEof => {
            "invalid named capture"
        }
        other => return other.to_string(),
    };
    re2j.to_owned()
}

/// RE2/J's description for a translation error (an unknown `\p{…}` class), else Rust's.
fn translate_description(kind: &hir::ErrorKind) -> String {
    match kind {
        hir::ErrorKind::UnicodePropertyNotFound | hir::ErrorKind::UnicodePropertyValueNotFound => {
            "invalid character class range".to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use uuid::Uuid;

    use super::*;
    use crate::coordinator::consumer_group::heartbeat::HeartbeatRequest;
    use crate::coordinator::consumer_group::member::Assignment;
    use crate::coordinator::consumer_group::{ConsumerGroupConfig, ConsumerGroups};

    fn compiled(pattern: &str) -> TopicRegex {
        TopicRegex::compile(pattern).expect("a valid pattern")
    }

    fn refused(pattern: &str) -> String {
        match TopicRegex::compile(pattern) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{pattern} compiled"),
        }
    }

    #[test]
    fn a_pattern_must_match_the_whole_topic_name() {
        assert!(!compiled("^topic").matches("topic-1"));
        assert!(!compiled("regex-abc").matches("regex-abc-1"));
        assert!(!compiled("abc").matches("x-abc"));
        assert!(compiled("regex-abc").matches("regex-abc"));
        assert!(compiled("^topic.*").matches("topic-1"));
        assert!(
            compiled("a|b").matches("b"),
            "an alternation stays inside the anchors"
        );
        assert!(!compiled("a|b").matches("ab"));
        assert!(!compiled("(?m)t$").matches("t\nx"), "no line anchors");
        assert!(compiled("(?i)ORDERS-[0-9]+").matches("orders-12"));
        assert!(compiled(r"\p{Greek}*x").matches("x"));
    }

    #[test]
    fn internal_topics_are_candidates_as_in_kafka_4_4() {
        // TopicRegexResolver matches every topic of the image; only DESCRIBE ACLs filter.
        let names = ["__consumer_offsets", "__transaction_state", "orders"];
        assert_eq!(
            resolve(&compiled("__.*"), names, &|_| true),
            BTreeSet::from(["__consumer_offsets".into(), "__transaction_state".into()])
        );
        assert_eq!(
            resolve(&compiled("ord.*"), names, &|_| true),
            BTreeSet::from(["orders".into()])
        );
    }

    #[test]
    fn a_bad_pattern_is_refused_with_kafkas_message_and_re2js_description() {
        // The descriptions RE2/J 1.8 (Kafka 4.4's) gives for these patterns.
        for (pattern, description) in [
            ("(topic", "missing closing )"),
            ("[a", "missing closing ]"),
            ("*a", "missing argument to repetition operator"),
            ("a**", "invalid nested repetition operator"),
            ("a++", "invalid nested repetition operator"),
            ("a)", "regexp/syntax: internal error"),
            ("x{2,1}", "invalid repeat count"),
            ("a{1001}", "invalid repeat count"),
            ("\\", "trailing backslash at end of expression"),
            ("\\q", "invalid escape sequence"),
            ("\\1", "invalid escape sequence"),
            ("(?<n>a)(?<n>b)", "duplicate capture group name"),
            ("(?x)a", "invalid or unsupported Perl syntax"),
            ("(?=a)", "invalid or unsupported Perl syntax"),
            ("(?", "invalid or unsupported Perl syntax"),
            ("(?:", "missing closing )"),
            ("[z-a]", "invalid character class range"),
            ("\\p{Foo}", "invalid character class range"),
        ] {
            assert_eq!(
                refused(pattern),
                format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."),
            );
        }
        let e = TopicRegex::compile("(").expect_err("refused");
        assert_eq!(
            crate::error::group_code(&e),
            brook_protocol::kafka_protocol::ResponseError::InvalidRegularExpression
        );
        assert!(
            TopicRegex::compile("a)|(b").is_err(),
            "cannot escape the anchors"
        );
        assert!(TopicRegex::compile("x{1000}").is_ok());
    }

    const ORDERS: Uuid = Uuid::from_u128(1);
    const ORDERS_EU: Uuid = Uuid::from_u128(2);

    fn topics(names: &[(&str, Uuid)]) -> BTreeMap<String, TopicMeta> {
        names
            .iter()
            .map(|(n, id)| {
                let meta = TopicMeta {
                    topic_id: *id,
                    partitions: 2,
                };
                (n.to_string(), meta)
            })
            .collect()
    }

    fn join(member_id: &str, regex: Option<&str>, names: Option<Vec<String>>) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: member_id.into(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: names,
            subscribed_topic_regex: regex.map(str::to_owned),
            server_assignor: None,
            owned: Some(Assignment::new()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    fn heartbeat(
        groups: &ConsumerGroups,
        req: &HeartbeatRequest,
        topics: &BTreeMap<String, TopicMeta>,
        version: i64,
    ) -> Result<Assignment, GroupError> {
        let cfg = ConsumerGroupConfig::default();
        let view = TopicsView::unrestricted(topics, version);
        groups
            .heartbeat("g", req, &Caller::anonymous(), &view, &cfg, Instant::now())
            .map(|r| r.assignment.unwrap_or_default())
    }

    #[test]
    fn a_pattern_resolves_to_the_topics_its_caller_may_describe_also_at_topic_changes() {
        // alice may describe `orders*` only; the anonymous principal everything.
        fn may_describe(c: &Caller, topic: &str) -> bool {
            c.principal != KafkaPrincipal::user("alice") || topic.starts_with("orders")
        }
        let alice = Caller {
            principal: KafkaPrincipal::user("alice"),
            host: IpAddr::from([127, 0, 0, 1]),
        };
        let groups = ConsumerGroups::default();
        let cfg = ConsumerGroupConfig::default();
        let before = topics(&[("orders", ORDERS), ("payroll", Uuid::from_u128(7))]);
        let view = |topics, version| TopicsView {
            topics,
            version,
            may_describe: &may_describe,
        };
        let join = join("a", Some(".*"), None);
        let reply = groups
            .heartbeat("g", &join, &alice, &view(&before, 1), &cfg, Instant::now())
            .expect("join");
        let assigned: Vec<Uuid> = reply.assignment.unwrap_or_default().into_keys().collect();
        assert_eq!(assigned, [ORDERS], "payroll is not alice's to see");
        let resolved = |g: &ConsumerGroup| g.resolved_regexes[".*"].topics.clone();
        assert_eq!(
            groups.with_group("g", resolved).expect("group"),
            BTreeSet::from(["orders".to_owned()])
        );

        // A topic created between heartbeats is filtered for alice, the group's caller.
        let mut after = before.clone();
        for (name, id) in [("orders-eu", ORDERS_EU), ("payroll-eu", Uuid::from_u128(8))] {
            let meta = TopicMeta {
                topic_id: id,
                partitions: 2,
            };
            after.insert(name.into(), meta);
        }
        assert_eq!(groups.topics_changed(&view(&after, 2)), ["g"]);
        assert_eq!(
            groups.with_group("g", resolved).expect("group"),
            BTreeSet::from(["orders".to_owned(), "orders-eu".to_owned()])
        );

        // A group loaded from its records has no caller yet: nothing resolves before a
        // heartbeat says for whom.
        groups
            .groups
            .lock()
            .get_mut("g")
            .expect("group")
            .regex_caller = None;
        assert!(groups.topics_changed(&view(&before, 3)).is_empty());
        assert_eq!(
            groups.with_group("g", resolved).expect("group"),
            BTreeSet::from(["orders".to_owned(), "orders-eu".to_owned()])
        );
    }

    #[test]
    fn members_sharing_a_pattern_resolve_it_once_and_follow_topics_created_and_deleted() {
        let groups = ConsumerGroups::default();
        let before = topics(&[("orders", ORDERS), ("orders-eu-x", Uuid::from_u128(9))]);
        let a = heartbeat(&groups, &join("a", Some("orders.*"), None), &before, 1).expect("a");
        assert_eq!(
            a.keys().copied().collect::<Vec<_>>(),
            [ORDERS, Uuid::from_u128(9)]
        );
        heartbeat(
            &groups,
            &join("b", Some("orders.*"), Some(vec![])),
            &before,
            1,
        )
        .expect("b");
        let resolved = |g: &ConsumerGroup| g.resolved_regexes.clone();
        let once = groups.with_group("g", resolved).expect("group");
        assert_eq!(once.len(), 1, "one entry for both members: {once:?}");
        assert_eq!(once["orders.*"].version, 1);

        // A topic created: the group epoch moves and the target takes the new topic in.
        let mut after = before.clone();
        after.insert(
            "orders-eu".into(),
            TopicMeta {
                topic_id: ORDERS_EU,
                partitions: 2,
            },
        );
        let epoch = |g: &ConsumerGroup| g.group_epoch;
        let targeted = |g: &ConsumerGroup| -> BTreeSet<Uuid> {
            g.target.values().flat_map(|a| a.keys().copied()).collect()
        };
        let before_epoch = groups.with_group("g", epoch).expect("group");
        groups.topics_changed(&TopicsView::unrestricted(&after, 2));
        let created_epoch = groups.with_group("g", epoch).expect("group");
        assert!(created_epoch > before_epoch);
        let with_new = groups.with_group("g", targeted).expect("group");
        assert!(with_new.contains(&ORDERS_EU), "{with_new:?}");
        // Evaluated once per metadata version: another call at version 2 changes nothing.
        groups.topics_changed(&TopicsView::unrestricted(&before, 2));
        assert_eq!(groups.with_group("g", epoch), Some(created_epoch));

        // Deleted: out of the resolution, the subscription and the target.
        groups.topics_changed(&TopicsView::unrestricted(&before, 3));
        let without = groups.with_group("g", targeted).expect("group");
        assert!(!without.contains(&ORDERS_EU), "{without:?}");
        let resolved = groups.with_group("g", |g| g.resolved_regexes["orders.*"].clone());
        assert_eq!(resolved.map(|r| (r.topics.len(), r.version)), Some((2, 3)));
    }

    #[test]
    fn an_empty_pattern_is_none_and_a_missing_one_leaves_the_subscription_as_it_was() {
        let groups = ConsumerGroups::default();
        let t = topics(&[("orders", ORDERS), ("orders-eu", ORDERS_EU)]);
        let a = heartbeat(&groups, &join("a", Some("orders-eu"), Some(vec![])), &t, 1).expect("a");
        let epoch = groups
            .with_group("g", |g| g.members["a"].member_epoch)
            .expect("g");
        assert_eq!(a.keys().copied().collect::<Vec<_>>(), [ORDERS_EU]);
        let unchanged = HeartbeatRequest {
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            owned: Some(a.clone()),
            ..join("a", None, None)
        };
        heartbeat(&groups, &unchanged, &t, 1).expect("beat");
        let member = |g: &ConsumerGroup| g.members["a"].subscribed_topic_regex.clone();
        assert_eq!(
            groups.with_group("g", member),
            Some(Some("orders-eu".into()))
        );

        let by_names_only = HeartbeatRequest {
            subscribed_topic_names: Some(vec!["orders".into()]),
            subscribed_topic_regex: Some(String::new()),
            ..unchanged
        };
        heartbeat(&groups, &by_names_only, &t, 1).expect("beat");
        assert_eq!(groups.with_group("g", member), Some(None));
        let patterns = groups.with_group("g", |g| g.resolved_regexes.len());
        assert_eq!(patterns, Some(0), "an unused pattern is forgotten");
    }

    #[test]
    fn a_bad_pattern_changes_nothing() {
        let groups = ConsumerGroups::default();
        let t = topics(&[("orders", ORDERS)]);
        let e = heartbeat(&groups, &join("a", Some("(orders"), None), &t, 1).expect_err("refused");
        assert!(
            matches!(e, GroupError::InvalidRegularExpression { .. }),
            "{e:?}"
        );
        assert!(!groups.exists("g"), "no group was left behind");
    }
}
