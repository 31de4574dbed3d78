//! Request memory pool metrics (`server::memory_pool`), with Kafka's names beside Brook's
//! (`kafka.network:type=SocketServer,name=MemoryPoolAvailable`, as the JMX exporter
//! spells it):
//!
//! - `brook_request_memory_pool_available_bytes` / `kafka_network_socketserver_memorypoolavailable`:
//!   free bytes (negative while a non-strict lease overdraws the pool);
//! - `brook_request_memory_pool_wait_seconds`: how long each connection that found the pool
//!   dry waited for its lease (histogram; its sum is Kafka's `MemoryPoolDepletedTimeTotal`
//!   seen per connection, its count the number of waits).

use std::time::Duration;

use metrics::{gauge, histogram, Gauge, Histogram};

/// The pool's metric handles, registered once.
pub struct PoolProbe {
    available: Gauge,
    available_kafka: Gauge,
    wait: Histogram,
}

impl PoolProbe {
    pub fn new() -> PoolProbe {
        PoolProbe {
            available: gauge!("brook_request_memory_pool_available_bytes"),
            available_kafka: gauge!("kafka_network_socketserver_memorypoolavailable"),
            wait: histogram!("brook_request_memory_pool_wait_seconds"),
        }
    }

    pub fn available(&self, bytes: i64) {
        // Gauges are f64; pool sizes are far below 2^53.
        self.available.set(bytes as f64);
        self.available_kafka.set(bytes as f64);
    }

    pub fn waited(&self, wait: Duration) {
        self.wait.record(wait.as_secs_f64());
    }
}

impl Default for PoolProbe {
    fn default() -> Self {
        PoolProbe::new()
    }
}
