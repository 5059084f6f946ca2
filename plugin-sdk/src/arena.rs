//! The allocator of plugins built for `wasm32-unknown-unknown` (the host's own handlers,
//! built without WASI). Rust's allocator for that target asks `memory.grow` for every new
//! region, ignoring the free space above the static data that the module starts with, so
//! every instance grew its memory on its first allocation: for the host, a change of the
//! memory's protection on each call and another when the instance's slot is reset.
//!
//! An instance lives for one call, so an arena is enough: it hands out memory upwards from
//! the end of the static data (`__heap_base`), takes back only the latest allocation (a
//! buffer that grows is grown in place), and grows the memory only when the arena is full.
//! Builds for WASI keep the standard allocator, and so does any plugin that does not ask for
//! the SDK's `arena` feature (the host's handlers do).

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::Cell;

const PAGE: usize = 65_536;

pub struct Arena {
    /// The first free byte; 0 until the first allocation.
    next: Cell<usize>,
    /// The end of the memory.
    end: Cell<usize>,
}

// Without the atomics feature the target has one thread (lib.rs installs it only then).
unsafe impl Sync for Arena {}

unsafe extern "C" {
    static __heap_base: u8;
}

impl Arena {
    pub const fn new() -> Arena {
        Arena {
            next: Cell::new(0),
            end: Cell::new(0),
        }
    }

    /// Makes the memory reach `stop`; false when it cannot grow that far.
    fn reach(&self, stop: usize) -> bool {
        if stop <= self.end.get() {
            return true;
        }
        let pages = (stop - self.end.get()).div_ceil(PAGE);
        // The end of a 4 GiB memory is not a wasm32 address: never grow to it.
        let Some(end) = pages
            .checked_mul(PAGE)
            .and_then(|grown| self.end.get().checked_add(grown))
        else {
            return false;
        };
        if wasm32::memory_grow(0, pages) == usize::MAX {
            return false;
        }
        self.end.set(end);
        true
    }
}

impl Default for Arena {
    fn default() -> Arena {
        Arena::new()
    }
}

unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.next.get() == 0 {
            self.next.set(&raw const __heap_base as usize);
            self.end.set(wasm32::memory_size(0).saturating_mul(PAGE));
        }
        let start = match self.next.get().checked_add(layout.align() - 1) {
            Some(n) => n & !(layout.align() - 1),
            None => return core::ptr::null_mut(),
        };
        match start.checked_add(layout.size()) {
            Some(stop) if self.reach(stop) => {
                self.next.set(stop);
                start as *mut u8
            }
            _ => core::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // The latest allocation grows or shrinks where it is.
        if ptr as usize + layout.size() == self.next.get() {
            return match (ptr as usize).checked_add(new_size) {
                Some(stop) if self.reach(stop) => {
                    self.next.set(stop);
                    ptr
                }
                _ => core::ptr::null_mut(),
            };
        }
        // Anything else shrinks where it is (its tail is lost until the instance ends).
        if new_size <= layout.size() {
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return core::ptr::null_mut();
        };
        // SAFETY: the caller's contract for `realloc` is `alloc`'s and `dealloc`'s.
        unsafe {
            let moved = self.alloc(new_layout);
            if !moved.is_null() {
                core::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
            }
            moved
        }
    }
}
