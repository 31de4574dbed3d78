//! The broker's process allocator (`brook::alloc`, installed in its `main.rs`): the system
//! allocator, except that huge requests (1 GiB and up) are served by `mmap(MAP_NORESERVE)`.
//! It lives beside the codec it protects against, so that everything running these decoders
//! (the broker, this crate's tests, the fuzz targets) runs them as the broker does.
//!
//! Why: the `kafka-protocol` decoders reserve `Vec::with_capacity(count)` for an array
//! count read straight off the wire. A request of a few bytes claiming 2^31 elements
//! asks for ~150 GB; the system allocator refuses, and Rust aborts the whole process on
//! allocation failure — one malformed frame would kill the broker. A `MAP_NORESERVE`
//! mapping reserves address space only: the decoder then fails on the missing bytes,
//! drops the untouched mapping and the connection is closed like any other malformed
//! frame. No legitimate Brook allocation comes near 1 GiB (frames are bounded by
//! `socket.request.max.bytes`, 100 MiB by default), so ordinary allocations never take
//! this path.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

/// Allocations of at least this many bytes are mapped, not malloc'd.
const HUGE: usize = 1 << 30;
/// mmap returns page-aligned memory; larger alignments go to the system allocator.
const PAGE: usize = 4096;

pub struct BrookAllocator;

fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE && layout.align() <= PAGE
}

// SAFETY: every method forwards to `System` except for huge layouts, which are served
// by anonymous private mappings of exactly `size` bytes (page-aligned, zero-filled) and
// returned with `munmap` of the same size; `realloc` across the threshold copies
// `min(old, new)` bytes between two valid allocations before freeing the old one.
unsafe impl GlobalAlloc for BrookAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            map(layout.size())
        } else {
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            // Anonymous mappings are zero-filled.
            map(layout.size())
        } else {
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(&layout) {
            // SAFETY: `ptr` came from `map(layout.size())`.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: same contract as the caller's.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        if !is_huge(&layout) && !is_huge(&new_layout) {
            // SAFETY: same contract as the caller's.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `new_layout` has a non-zero size (it is huge, or `layout` was).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for `min(old, new)` bytes and distinct.
            unsafe {
                ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with no address hint touches no existing
    // memory; failure is reported as MAP_FAILED and turned into null.
    let addr = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        addr.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_two_billion_element_array_costs_no_memory() {
        let layout = Layout::from_size_align(150 * HUGE, 8).expect("layout");
        // SAFETY: non-zero size; freed with the same layout below.
        let p = unsafe { BrookAllocator.alloc(layout) };
        assert!(!p.is_null());
        // SAFETY: the mapping is readable and zero-filled.
        assert_eq!(unsafe { *p }, 0);
        // SAFETY: allocated above with this layout.
        unsafe { BrookAllocator.dealloc(p, layout) };
    }

    #[test]
    fn growing_across_the_threshold_keeps_the_bytes() {
        let small = Layout::from_size_align(16, 8).expect("layout");
        // SAFETY: non-zero size.
        let p = unsafe { BrookAllocator.alloc(small) };
        assert!(!p.is_null());
        // SAFETY: p is valid for 16 bytes; realloc contract respected.
        unsafe {
            ptr::write_bytes(p, 7, 16);
            let big = BrookAllocator.realloc(p, small, HUGE);
            assert!(!big.is_null());
            assert_eq!(*big.add(15), 7);
            BrookAllocator.dealloc(big, Layout::from_size_align(HUGE, 8).expect("layout"));
        }
    }
}
