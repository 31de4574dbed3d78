//! The metadata quorum's peer transport (`brook_raft::network::read_frame`): a stream of
//! length-prefixed JSON frames read as requests and as responses, as a voter's server and
//! a client read them. What decodes re-encodes to the same JSON, and every forwarded
//! `Propose` is applied by the state machine, in order, to one image, whose JSON form
//! (what snapshots hold) must read back equal.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use brook_raft::fuzzing::apply;
use brook_raft::network::{read_frame, RpcRequest, RpcResponse};
use brook_raft::MetadataImage;
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Runs a future that never waits (it reads from a slice) to completion.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("a read from a slice waited"),
    }
}

/// Every frame of `data` as `T`, until the first that does not read.
fn frames<T: DeserializeOwned>(mut data: &[u8]) -> Vec<T> {
    let mut out = Vec::new();
    while let Ok(Some(message)) = now(read_frame::<_, T>(&mut data)) {
        out.push(message);
    }
    out
}

fn round_trips<T: Serialize + DeserializeOwned>(message: &T) {
    let json = serde_json::to_vec(message).expect("a decoded message encodes");
    let again: T = serde_json::from_slice(&json).expect("its JSON decodes");
    let json_again = serde_json::to_vec(&again).expect("encodes");
    assert_eq!(json, json_again, "JSON round trip");
}

fuzz_target!(|data: &[u8]| {
    let mut image = MetadataImage::default();
    for (index, request) in frames::<RpcRequest>(data).iter().enumerate() {
        round_trips(request);
        if let RpcRequest::Propose(command) = request {
            let _ = apply(&mut image, command, index as u64 + 1);
        }
    }
    let json = serde_json::to_vec(&image).expect("an image encodes");
    let back: MetadataImage = serde_json::from_slice(&json).expect("an image decodes");
    assert_eq!(back, image, "image JSON round trip");
    for response in frames::<RpcResponse>(data) {
        round_trips(&response);
    }
});
