//! The names in a partition directory, read once when the log is opened.
//!
//! Opening a log used to list its directory four times (interrupted cleans, segment
//! files, producer snapshots twice) and to probe for each optional file (indexes, the
//! epoch and cleaner checkpoints, `.txnindex`) with an open that mostly failed: about 45
//! system calls for a quiet partition, which at 100,000 partitions was most of a start.
//! One listing answers all of those questions; a directory holding the leftovers of an
//! interrupted clean is listed again after they are completed.

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use crate::error::{io_err, Result};

pub(crate) struct Listing {
    names: HashSet<String>,
}

impl Listing {
    /// The directory's entries; `None` if it does not exist.
    pub(crate) fn read(dir: &Path) -> Result<Option<Listing>> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("list log dir", dir)(e)),
        };
        let mut names = HashSet::new();
        for entry in entries {
            let entry = entry.map_err(io_err("list log dir", dir))?;
            // Brook never writes a name that is not UTF-8; such a file is not its own.
            if let Ok(name) = entry.file_name().into_string() {
                names.insert(name);
            }
        }
        Ok(Some(Listing { names }))
    }

    /// An empty directory (just created).
    pub(crate) fn empty() -> Listing {
        Listing {
            names: HashSet::new(),
        }
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Whether a clean was interrupted here (`.cleaned` or `.swap` files): it must be
    /// completed or rolled back before the segments are read.
    pub(crate) fn has_interrupted_clean(&self) -> bool {
        self.names()
            .any(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
    }
}
