//! The positional write and the fsync that segment and index files go through, with a
//! seam for unit tests to make them fail as a full disk or a failing disk does.
//!
//! A full disk fails a `pwrite` part-way: the bytes that fit are written, then ENOSPC.
//! Tests arm `disk_full_after(room)` on their own thread (thread-local, so tests running
//! side by side are unaffected); the next writes on that thread then take `room` more
//! bytes and fail with `ErrorKind::StorageFull` after writing what fitted. Outside tests
//! this is `FileExt::write_all_at` and nothing else.
//!
//! A failing disk fails writes and fsyncs with an OS error such as EIO: tests arm
//! `disk_fails_with(errno)` the same way (`log_dir_failure` then takes the directory
//! offline).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

#[cfg(test)]
thread_local! {
    /// Bytes this thread may still write before its writes fail (`None`: no fault).
    static ROOM: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    /// The OS error this thread's writes and fsyncs fail with (`None`: no fault).
    static ERRNO: std::cell::Cell<Option<i32>> = const { std::cell::Cell::new(None) };
}

/// Writes all of `buf` at `position`.
pub(crate) fn write_all_at(file: &File, buf: &[u8], position: u64) -> io::Result<()> {
    #[cfg(test)]
    if let Some(errno) = ERRNO.get() {
        return Err(io::Error::from_raw_os_error(errno));
    }
    #[cfg(test)]
    if let Some(room) = ROOM.get() {
        let fits = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        ROOM.set(Some(room - fits as u64));
        file.write_all_at(&buf[..fits], position)?;
        if fits < buf.len() {
            return Err(io::Error::from(io::ErrorKind::StorageFull));
        }
        return Ok(());
    }
    file.write_all_at(buf, position)
}

/// Makes this thread's writes through `write_all_at` fail with ENOSPC once `room` more
/// bytes were written; `None` lifts the fault (space freed).
#[cfg(test)]
pub(crate) fn disk_full_after(room: Option<u64>) {
    ROOM.set(room);
}

/// Fsyncs `file`'s data (`File::sync_data`, fdatasync).
pub(crate) fn sync_data(file: &File) -> io::Result<()> {
    #[cfg(test)]
    if let Some(errno) = ERRNO.get() {
        return Err(io::Error::from_raw_os_error(errno));
    }
    file.sync_data()
}

/// Makes this thread's writes and fsyncs through this module fail with OS error `errno`;
/// `None` lifts the fault.
#[cfg(test)]
pub(crate) fn disk_fails_with(errno: Option<i32>) {
    ERRNO.set(errno);
}
