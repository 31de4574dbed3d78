//! Authorization. Brook has no authorizer yet, so every principal may do everything;
//! `authorized` reports that in the bitfields clients ask for.

pub mod authorized;
