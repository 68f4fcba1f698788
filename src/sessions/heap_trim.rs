//! Handing the heap that removed sessions freed back to the kernel.
//!
//! glibc's malloc keeps freed memory in its arenas for reuse and returns it only from the top
//! of each heap, so after thousands of sessions are forgotten the daemon's RSS stays near its
//! peak: measured at 2,000 `cat` sessions, 69 MiB with every session gone, 18 MiB after one
//! `malloc_trim(0)`. The manager asks for a trim once removals stop for a moment (never on a
//! timer of its own), so the cost, a walk over the free lists, is paid once per wave of
//! forgets. Other allocators return memory on their own; there this is a no-op.

/// Returns the free memory of every malloc arena to the kernel, where the allocator allows.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointers and only walks the allocator's own state
        // under its locks; it is safe to call from any thread at any time. Its answer (whether
        // anything was released) changes nothing here.
        let _ = unsafe { libc::malloc_trim(0) };
    }
}
