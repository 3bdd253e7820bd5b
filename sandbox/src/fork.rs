//! The crate's one `unsafe` block: `fork()`.

use nix::unistd::ForkResult;

/// `fork()`, for callers that are single-threaded: the launcher (checked by
/// [`crate::namespace::ensure_single_threaded`] and starting no thread before it forks) and
/// its forked copies before they start any thread of their own.
pub(crate) fn fork_single_threaded() -> nix::Result<ForkResult> {
    // SAFETY: fork is unsound only when other threads exist, since the child would inherit
    // locks they might hold. Every caller is single-threaded at this point (see above). Each
    // child runs the crate's own code, starts threads only after its fork, and leaves through
    // `std::process::exit`, never returning into the caller's stack frames.
    #[allow(unsafe_code)]
    unsafe {
        nix::unistd::fork()
    }
}
