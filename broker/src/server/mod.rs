//! The network side: listeners accept connections, each connection reads frames and
//! answers them in order, `dispatch` routes a decoded request to its handler, `write`
//! sends the response (record sets with `sendfile`).

pub mod closed;
pub mod connection;
pub mod connection_limits;
pub mod connection_rate;
pub mod dispatch;
pub mod frame_reader;
pub mod listener;
pub mod memory_pool;
pub mod session;
pub mod tls;
mod tls_pem_key;
pub mod tls_reload;
pub mod tls_stores;
pub(crate) mod tls_suites;
#[cfg(test)]
mod tls_testdata;
pub mod write;
pub mod write_tls;

pub use listener::serve;
