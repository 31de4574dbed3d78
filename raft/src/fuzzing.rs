//! Entry points for the fuzz crate (`fuzz/`, feature `fuzzing`) into what this crate decodes
//! from peers and disk but keeps private: a snapshot file (also what InstallSnapshot carries)
//! and the state machine's `apply` of a command (what a forwarded `Propose` carries). Never
//! built otherwise.

use crate::command::{ApplyResult, Command};
use crate::image::MetadataImage;

/// The image of a snapshot file, as `StateMachineStore` reads it (format version checked).
pub fn decode_snapshot(data: &[u8]) -> Option<MetadataImage> {
    crate::state_machine::decode_snapshot(data)
        .ok()
        .map(|file| file.image)
}

/// The state machine's apply of `cmd` at log index `index`.
pub fn apply(image: &mut MetadataImage, cmd: &Command, index: u64) -> ApplyResult {
    crate::apply::apply(image, cmd, index)
}
