//! Ports for the quorum tests' nodes: chosen, then bound by a node a moment later. A port from
//! the kernel's ephemeral range (32768+) could meanwhile become some client's local port, so
//! these come from 11000-11999: below that range, and apart from the broker's process tests
//! (10000-10999) and the Python suite (12000-31999, integration-tests/harness/broker.py). Handed
//! out in turn from a start that differs per process, skipping any that cannot be bound now.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

const FIRST: u32 = 11_000;
const COUNT: u32 = 1_000;

pub fn free_port() -> anyhow::Result<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id();
    let _ = NEXT.compare_exchange(u32::MAX, seed % COUNT, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..COUNT {
        let port = u16::try_from(FIRST + NEXT.fetch_add(1, Ordering::SeqCst) % COUNT)?;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    anyhow::bail!("no free port in {FIRST}-{}", FIRST + COUNT - 1)
}
