//! What the broker's log lines may contain and how many of them a client can cause.
//!
//! Client-supplied strings (client ids, topics, groups, members, principals, transactional
//! ids) reach log lines; `escape` makes every field and message unable to start a new line,
//! move the cursor or hide text. Bad input from the network is logged through `limit`, so a
//! flood of it is counted, not written line by line.

pub mod escape;
pub mod limit;
pub mod sites;

pub use escape::escaped_fields;
