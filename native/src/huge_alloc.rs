//! The crate's allocator: the system's, except that an allocation of a gibibyte or more is an
//! anonymous mapping made with `MAP_NORESERVE`, which the kernel only backs with memory as
//! its pages are touched.
//!
//! Why: the `kafka-protocol` crate sizes each array's vector from the element count a
//! frame claims before decoding one element (`Vec::with_capacity`), so a frame of a hundred
//! bytes claiming two billion topics asks for hundreds of gigabytes; the system allocator
//! refuses, and Rust aborts the process on a refused allocation (no panic to catch). The
//! fuzz test in `wire_codec` found it. With this allocator such a vector is reserved
//! without being backed, the decoder runs out of bytes after at most the frame's length in
//! elements, returns its error and the mapping is unmapped: memory touched stays
//! proportional to the bytes received. Where the kernel accounts every mapping
//! (`vm.overcommit_memory=2`) or an address-space limit is set, the reservation can still
//! fail: `wire_safe` says so, and the server then decodes OffsetCommit with kio instead.

use std::alloc::{GlobalAlloc, Layout, System};

/// allocations of this size or more are mapped, not taken from malloc
const HUGE: usize = 1 << 30;

pub struct HugeAlloc;

fn page_aligned(layout: &Layout) -> bool {
    layout.align() <= 4096
}

// SAFETY: every method hands out memory valid for its layout (malloc's, or a fresh mapping
// of at least `layout.size()` bytes, page-aligned, for aligns up to a page), and frees
// through the same path it was taken from: the size decides the path and Rust passes the
// same layout to `dealloc` that it gave to `alloc`.
unsafe impl GlobalAlloc for HugeAlloc {
    // SAFETY: (GlobalAlloc's contract, the impl's note above) memory valid for `layout`
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE && page_aligned(&layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's contract (a non-zero size) is passed on unchanged
            unsafe { System.alloc(layout) }
        }
    }

    // SAFETY: (GlobalAlloc's contract) `ptr` came from `alloc` with this `layout`, which
    // decides the same path back
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= HUGE && page_aligned(&layout) {
            // SAFETY: `ptr` is a mapping of `layout.size()` bytes made by `map` (see alloc)
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: `ptr` came from System.alloc with this layout (see alloc)
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    // SAFETY: (GlobalAlloc's contract) `ptr` came from `alloc` with `layout`; the block
    // returned is valid for `new_size` and holds the old bytes up to the smaller size
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if (layout.size() < HUGE && new_size < HUGE) || !page_aligned(&layout) {
            // SAFETY: both sizes are malloc's: the caller's contract is passed on unchanged
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `layout.align()` is a power of two no larger than a page and `new_size`
        // is non-zero (the caller's contract), so this layout is valid
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a fresh allocation of the new layout
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller size and do not overlap (the
            // new one is fresh); the old one is freed with its own layout after the copy
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address the kernel picks touches no
    // existing memory; failure is MAP_FAILED, turned into null (a refused allocation)
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE,
                   libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Whether a reservation as large as a hostile frame can ask for (the largest the crate's
/// decoders could request: 2^32 elements of a few hundred bytes) succeeds here: tried once.
pub fn wire_safe() -> bool {
    let size = 1usize << 41; // 2 TiB of address space, never touched
    let p = map(size);
    if p.is_null() {
        return false;
    }
    // SAFETY: `p` is the mapping just made, of `size` bytes
    unsafe { libc::munmap(p.cast(), size) };
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_huge_vector_is_reserved_not_backed_and_freed() {
        assert!(super::wire_safe());
        let mut v: Vec<u64> = Vec::with_capacity(1 << 37); // 1 TiB, a page or two touched
        v.extend(0..1000);
        assert_eq!(v.iter().sum::<u64>(), 999 * 1000 / 2);
        drop(v);
        let mut grown: Vec<u8> = (0..=255).collect();
        grown.reserve(3 << 30); // from malloc to a mapping by realloc: the bytes move along
        assert!(grown.iter().copied().eq(0..=255));
        grown.shrink_to_fit(); // and back
        assert!(grown.iter().copied().eq(0..=255));
    }
}
