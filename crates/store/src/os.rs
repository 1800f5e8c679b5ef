//! The store's calls into the operating system that the standard library does not offer, each
//! behind a small safe function: the only `unsafe` of the store outside its memory mappings.
//!
//! What is here: the local time of a clock reading (`localtime_r`, for retention hours and
//! IndexFile names), the size and free space of a filesystem (`statvfs`), the machine's physical
//! memory (`sysconf`), and the file-range calls that manage the disk blocks and page cache of
//! store files (`fallocate`, `sync_file_range`, `posix_fadvise`).
//!
//! Why one module: each call has preconditions (valid pointers, structs the C library fills, a
//! type width that differs between platforms) that are checked once here, next to the one
//! `// SAFETY:` comment that argues them, instead of in every file that needs the call. The
//! callers keep their own policy (what a failure means for them); the functions here only turn
//! the C conventions into `Option` and `std::io::Result`.
//!
//! The file-range calls exist on Linux only. Elsewhere they behave as a filesystem without
//! support would: writeback and page-cache advice do nothing, allocating and punching holes fail
//! with [`std::io::ErrorKind::Unsupported`].

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::path::Path;

/// A moment in the process's local time zone (calendar fields as people read them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalTime {
    pub(crate) year: i64,
    /// 1..=12.
    pub(crate) month: i64,
    /// 1..=31.
    pub(crate) day: i64,
    /// 0..=23.
    pub(crate) hour: i64,
    pub(crate) minute: i64,
    /// 0..=60 (a leap second).
    pub(crate) second: i64,
}

/// `unix_secs` in the process's local time zone (`localtime_r(3)`); `None` when the C library
/// cannot convert it (or `time_t` cannot hold it), for the caller to fall back to UTC.
pub(crate) fn local_time(unix_secs: i64) -> Option<LocalTime> {
    // `time_t` is 64-bit on the platforms we build for, but not everywhere.
    #[allow(irrefutable_let_patterns)]
    let Ok(t) = libc::time_t::try_from(unix_secs) else {
        return None;
    };
    // SAFETY: `tm` is plain old data, so an all-zero value is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the duration of the call; `localtime_r` is the
    // re-entrant variant and only writes into our `tm`.
    let res = unsafe { libc::localtime_r(&t, &mut tm) };
    if res.is_null() {
        return None;
    }
    Some(LocalTime {
        year: i64::from(tm.tm_year) + 1900,
        month: i64::from(tm.tm_mon) + 1,
        day: i64::from(tm.tm_mday),
        hour: i64::from(tm.tm_hour),
        minute: i64::from(tm.tm_min),
        second: i64::from(tm.tm_sec),
    })
}

/// Size and free space of a filesystem, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FilesystemSpace {
    pub(crate) total_bytes: u64,
    /// Free, including the blocks reserved for root.
    pub(crate) free_bytes: u64,
    /// Free for unprivileged users.
    pub(crate) available_bytes: u64,
}

/// The figures of the filesystem holding `path` (`statvfs(3)`).
pub(crate) fn filesystem_space(path: &Path) -> io::Result<FilesystemSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: `statvfs` is plain old data, so an all-zero value is valid.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the call reads the NUL-terminated path, which outlives it, and only writes into
    // `stat`; both pointers are valid for the duration of the call.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The field widths differ between platforms, hence the explicit conversions.
    #[allow(clippy::useless_conversion)]
    let (frsize, blocks, bfree, bavail) = (
        u64::from(stat.f_frsize),
        u64::from(stat.f_blocks),
        u64::from(stat.f_bfree),
        u64::from(stat.f_bavail),
    );
    Ok(FilesystemSpace {
        total_bytes: blocks.saturating_mul(frsize),
        free_bytes: bfree.saturating_mul(frsize),
        available_bytes: bavail.saturating_mul(frsize),
    })
}

/// Bytes of RAM (physical pages × page size, `sysconf(3)`); `None` when the system does not say.
pub(crate) fn physical_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page_size)) {
        (Ok(p), Ok(s)) => Some(p.saturating_mul(s)),
        _ => None,
    }
}

/// Whether `e` says the filesystem (or the kernel) does not support the call, as `fallocate`
/// fails on filesystems that cannot allocate ahead or punch holes.
pub(crate) fn is_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || e.raw_os_error() == Some(libc::EOPNOTSUPP)
        || e.raw_os_error() == Some(libc::ENOSYS)
}

/// `[start, start + len)` as the kernel's 64-bit file offsets; `None` when they do not fit.
#[cfg(target_os = "linux")]
fn file_range(start: u64, len: u64) -> Option<(libc::off64_t, libc::off64_t)> {
    Some((
        libc::off64_t::try_from(start).ok()?,
        libc::off64_t::try_from(len).ok()?,
    ))
}

/// Turns a C return code that sets `errno` into a result.
#[cfg(target_os = "linux")]
fn errno_result(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Starts writing `[start, start + len)` of `file` back without waiting
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`). A range beyond what the kernel's offsets can
/// express is left alone. Does nothing outside Linux.
#[cfg(target_os = "linux")]
pub(crate) fn start_writeback(file: &File, start: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some((start, len)) = file_range(start, len) else {
        return Ok(());
    };
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc =
        unsafe { libc::sync_file_range(file.as_raw_fd(), start, len, libc::SYNC_FILE_RANGE_WRITE) };
    errno_result(rc)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn start_writeback(_file: &File, _start: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

/// Allocates the blocks of `[start, start + len)` of `file` without writing them (`fallocate`,
/// mode 0: the file's size and contents stay as they are; unwritten blocks read as zeros).
#[cfg(target_os = "linux")]
pub(crate) fn allocate(file: &File, start: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some((start, len)) = file_range(start, len) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc = unsafe { libc::fallocate64(file.as_raw_fd(), 0, start, len) };
    errno_result(rc)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn allocate(_file: &File, _start: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Gives back the disk blocks of `[start, start + len)` of `file`, keeping its size
/// (`fallocate(PUNCH_HOLE | KEEP_SIZE)`); the range then reads as zeros, through a mapping too.
#[cfg(target_os = "linux")]
pub(crate) fn punch_hole(file: &File, start: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some((start, len)) = file_range(start, len) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc = unsafe { libc::fallocate64(file.as_raw_fd(), mode, start, len) };
    errno_result(rc)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn punch_hole(_file: &File, _start: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Asks the kernel to drop the cached pages of `[start, start + len)` of `file`
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`); it leaves pages that are mapped or dirty. Does
/// nothing outside Linux.
#[cfg(target_os = "linux")]
pub(crate) fn advise_dont_need(file: &File, start: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(start), libc::off_t::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_dont_need(_file: &File, _start: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

/// Whether `file` lives on tmpfs, whose pages are the file itself: the page cache cannot drop
/// them (`fstatfs(2)`). For tests that measure the page cache.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn is_on_tmpfs(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: fstatfs fills the struct it is given; the descriptor is open.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), fs.as_mut_ptr()) };
    errno_result(rc)?;
    // SAFETY: initialised by the successful call above (and zeroed before it).
    Ok(unsafe { fs.assume_init() }.f_type == libc::TMPFS_MAGIC)
}

/// For each page of `mapped`, whether it is in the page cache (`mincore(2)`; it faults nothing
/// in). `mapped` must start at a page boundary, as a whole mapping does; otherwise the call
/// fails. For tests that measure the page cache.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn resident_pages(mapped: &[u8]) -> io::Result<Vec<bool>> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page_size = usize::try_from(page_size)
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(io::Error::last_os_error)?;
    let mut pages = vec![0u8; mapped.len().div_ceil(page_size)];
    // SAFETY: the address and length are those of memory we borrow for the call, and the vector
    // holds one byte per page of it, which is all the call writes.
    let rc = unsafe {
        libc::mincore(
            mapped.as_ptr() as *mut libc::c_void,
            mapped.len(),
            pages.as_mut_ptr(),
        )
    };
    errno_result(rc)?;
    Ok(pages.iter().map(|p| p & 1 == 1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_has_calendar_fields() {
        for secs in [951_782_400, 1_700_000_000] {
            let t = local_time(secs).expect("local time");
            assert!((1..=12).contains(&t.month), "{t:?}");
            assert!((1..=31).contains(&t.day), "{t:?}");
            assert!((0..24).contains(&t.hour), "{t:?}");
            assert!((0..60).contains(&t.minute), "{t:?}");
            // Since 1972 every time zone differs from UTC by whole minutes.
            assert_eq!(t.second, secs.rem_euclid(60), "{t:?}");
        }
    }

    #[test]
    fn filesystem_space_of_the_temp_dir() {
        let space = filesystem_space(&std::env::temp_dir()).expect("statvfs");
        assert!(space.total_bytes > 0);
        assert!(space.free_bytes <= space.total_bytes);
        assert!(space.available_bytes <= space.free_bytes);
        assert!(filesystem_space(Path::new("/definitely/not/here")).is_err());
        assert_eq!(
            filesystem_space(Path::new("a\0b")).map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidInput)
        );
    }

    #[test]
    fn physical_memory_is_known() {
        assert!(physical_memory_bytes().is_some_and(|b| b > 0));
    }
}
