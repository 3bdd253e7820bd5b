//! Refuses to start a command whose user could reach the gate's own data: its database, CA
//! key and tokens. Such a command could approve hosts for itself (a row in `admin_sites`) or
//! mint certificates, whatever the network isolation. Also refuses a working directory the
//! command's user cannot enter.
//!
//! The launcher knows the gate's data directory only where it is told or where the gate
//! would look: `--gate-data-dir DIR` (which must exist), the gate's own
//! `EGRESSGATE_DATA_DIR`, and `./egressgate-data` (the gate's default) in the working
//! directory. Each one that exists is checked. The questions go to the kernel (`access(2)`)
//! as the command's user itself: for a root launcher, a forked child that has become that
//! user asks them, so ACLs, read-only mounts and group membership count exactly as they will
//! for the command. Refused when that user could:
//!
//! - write the data directory (add or replace any file in it);
//! - read or write a file directly in it (database, key, tokens), or write a directory in it
//!   (the blob store);
//! - rename the data directory or one of its parents away and put its own in its place: a
//!   writable parent, unless the parent is sticky (`/tmp`) and the user owns neither it nor
//!   the entry.
//!
//! A PostgreSQL deployment keeps its data (and the CA key) in the database, which the command
//! cannot name: the launcher removes `DATABASE_URL` and every `EGRESSGATE_*` variable from its
//! environment, and the database's own authentication does the rest.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::unistd::{AccessFlags, ForkResult, eaccess, pipe2};

use crate::error::{EXIT_LAUNCHER_ERROR, SandboxError};
use crate::fork::fork_single_threaded;
use crate::identity::Identity;
use crate::namespace::ensure_single_threaded;
use crate::supervise::reap_blocking;

/// The gate's variable for its data directory.
const DATA_DIR_ENV: &str = "EGRESSGATE_DATA_DIR";
/// The gate's default data directory, relative to the directory it starts in.
const DEFAULT_DATA_DIR: &str = "egressgate-data";
/// What the gate keeps in its data directory, checked even where the launcher cannot list it.
const KNOWN_ENTRIES: [&str; 6] = [
    "egressgate.db",
    "egressgate.db-wal",
    "egressgate.db-shm",
    "tokens",
    "ca-key.pem",
    "blobs",
];
/// The sticky bit: in such a directory only an entry's owner (or the directory's) may rename
/// or remove it.
const STICKY: u32 = 0o1000;

/// One question put to the kernel as the command's user.
struct Probe {
    path: PathBuf,
    mode: AccessFlags,
    /// Refused when access is granted (the gate's data), or when it is denied (the working
    /// directory).
    refuse_if_granted: bool,
    /// The refusal, one line.
    why: String,
}

/// `Err(Refused)` when `identity` could reach a data directory of the gate, or (for a user
/// other than the launcher's) could not enter the working directory. `named` are the
/// `--gate-data-dir` values. Must be called single-threaded.
pub(crate) fn check(identity: &Identity, named: &[PathBuf]) -> Result<(), SandboxError> {
    let who = identity.describe();
    let mut probes = Vec::new();
    for dir in data_dirs(named)? {
        probes.extend(data_dir_probes(&dir, identity, &who));
    }
    if matches!(identity, Identity::User(_)) {
        let cwd = std::env::current_dir()
            .map_err(|e| SandboxError::setup("reading the working directory", e))?;
        probes.push(Probe {
            why: format!(
                "the working directory {} is not accessible to {who} (start the launcher in a \
                 directory that user may enter, or choose another --as-user)",
                cwd.display()
            ),
            path: cwd,
            mode: AccessFlags::X_OK,
            refuse_if_granted: false,
        });
    }
    let failed = match identity {
        Identity::User(_) if !probes.is_empty() => first_failure_as(identity, &probes)?,
        _ => first_failure(&probes),
    };
    match failed.and_then(|i| probes.get(i)) {
        Some(probe) => Err(SandboxError::Refused(probe.why.clone())),
        None => Ok(()),
    }
}

/// Every data directory the launcher knows of, resolved (no symbolic link left in the path,
/// so its real parents are the ones checked), each once.
fn data_dirs(named: &[PathBuf]) -> Result<Vec<PathBuf>, SandboxError> {
    let mut dirs = Vec::new();
    for dir in named {
        let bad = |why: String| {
            SandboxError::Refused(format!("--gate-data-dir {}: {why}", dir.display()))
        };
        let real = dir.canonicalize().map_err(|e| bad(e.to_string()))?;
        if !real.is_dir() {
            return Err(bad("not a directory".into()));
        }
        dirs.push(real);
    }
    let implied = std::env::var_os(DATA_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(DEFAULT_DATA_DIR)]);
    // Where the gate has not made it (yet), there is nothing to protect.
    dirs.extend(implied.filter_map(|dir| dir.canonicalize().ok()));
    let mut unique = Vec::new();
    for dir in dirs {
        if dir.is_dir() && !unique.contains(&dir) {
            unique.push(dir);
        }
    }
    Ok(unique)
}

/// The questions for one data directory (see the module comment), most telling first.
fn data_dir_probes(dir: &Path, identity: &Identity, who: &str) -> Vec<Probe> {
    let refuse = |path: &Path, mode, why: String| Probe {
        path: path.to_owned(),
        mode,
        refuse_if_granted: true,
        why,
    };
    let mut probes = vec![refuse(
        dir,
        AccessFlags::W_OK,
        format!(
            "{who} could write the gate's data directory {} (choose another --as-user, or \
             make the directory private to the gate's user)",
            dir.display()
        ),
    )];
    let mut names: Vec<_> = KNOWN_ENTRIES.iter().map(PathBuf::from).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        names.extend(entries.flatten().map(|e| PathBuf::from(e.file_name())));
    }
    names.sort();
    names.dedup();
    for name in names {
        let path = dir.join(name);
        // Where the launcher cannot see it, neither can the command's user (the launcher is
        // that user, or root).
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let read = format!("{who} could read {}", path.display());
        let write = format!("{who} could write {}", path.display());
        if !meta.is_dir() {
            probes.push(refuse(&path, AccessFlags::R_OK, read));
        }
        probes.push(refuse(&path, AccessFlags::W_OK, write));
    }
    let (uid, _) = identity.ids();
    for entry in dir.ancestors() {
        let Some(parent) = entry.parent() else {
            break;
        };
        let (Ok(entry_meta), Ok(parent_meta)) = (entry.metadata(), parent.metadata()) else {
            continue;
        };
        let sticky = parent_meta.mode() & STICKY != 0;
        if sticky && entry_meta.uid() != uid.as_raw() && parent_meta.uid() != uid.as_raw() {
            continue;
        }
        probes.push(refuse(
            parent,
            AccessFlags::W_OK,
            format!(
                "{who} could rename {} (its directory {} is writable) and put another in its \
                 place",
                entry.display(),
                parent.display()
            ),
        ));
    }
    probes
}

/// The first probe that refuses, asked as this process's own (effective) ids.
fn first_failure(probes: &[Probe]) -> Option<usize> {
    probes
        .iter()
        .position(|p| eaccess(p.path.as_path(), p.mode).is_ok() == p.refuse_if_granted)
}

/// [`first_failure`] asked by a forked child that has become `identity`'s user.
fn first_failure_as(identity: &Identity, probes: &[Probe]) -> Result<Option<usize>, SandboxError> {
    ensure_single_threaded()?;
    let (read, write) =
        pipe2(OFlag::O_CLOEXEC).map_err(|e| SandboxError::setup("creating a pipe", e))?;
    match fork_single_threaded().map_err(|e| SandboxError::setup("forking", e))? {
        ForkResult::Child => {
            drop(read);
            let answer = match identity.assume() {
                Ok(()) => first_failure(probes).map_or("none".to_owned(), |i| i.to_string()),
                Err(why) => format!("error {why}"),
            };
            let written = File::from(write).write_all(answer.as_bytes());
            std::process::exit(if written.is_ok() {
                0
            } else {
                EXIT_LAUNCHER_ERROR
            })
        }
        ForkResult::Parent { child } => {
            drop(write);
            let mut answer = String::new();
            let got = File::from(read).take(4096).read_to_string(&mut answer);
            reap_blocking(child);
            got.map_err(|e| SandboxError::setup("reading the permission check's answer", e))?;
            match answer.as_str() {
                "none" => Ok(None),
                other => match other.strip_prefix("error ") {
                    Some(why) => Err(SandboxError::AsUser(why.to_owned())),
                    None => other.parse().map(Some).map_err(|_| {
                        SandboxError::InsideSetup(format!(
                            "the permission check as {} gave no answer",
                            identity.describe()
                        ))
                    }),
                },
            }
        }
    }
}
