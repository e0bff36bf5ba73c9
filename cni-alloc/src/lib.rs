//! The global allocator of every plugin binary: the netlink plugins link
//! this crate through cni-net; host-local, static and noop, which do not
//! use cni-net, opt in with `use cni_alloc as _;`.
//!
//! dlmalloc keeps the memory it has mapped for the next allocation, where
//! musl's allocator (mallocng) unmaps freed groups at once. A plugin lives a
//! few milliseconds and never gets to reuse what it gave back, so under musl
//! it paid mmap/munmap pairs (and the page faults of memory mapped anew)
//! for allocations that dlmalloc serves from what it already holds:
//! netlink-packet-route decodes each answer into owned values (a link
//! message is a Vec of 40-odd attributes of 200 bytes each), and a
//! host-local ADD went from 92 system calls (24 of them mmap/munmap) and
//! 34 page faults to 69 and 22, for 13 KB of code; a static ADD from 39
//! system calls (18 of them mmap/munmap/brk) to 24 (3), and 10-17% less
//! time, for 9 KB.

#![no_std]

#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
