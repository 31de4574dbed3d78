//! The network side: listeners accept connections, each connection reads frames and
//! answers them in order, `dispatch` routes a decoded request to its handler.

pub mod connection;
pub mod dispatch;
pub mod listener;

pub use listener::serve;
