//! Who the command is on the host's files: never host root unless asked for by name.
//!
//! The kernel checks a file's permissions against the process's host ids (its kuid, kgid and
//! supplementary groups) whatever user namespace it runs in, and a capability held only in
//! the sandbox's own user namespace counts solely on files whose owner is mapped into it. So
//! a root launcher runs the command as an unprivileged user (`--as-user`, default `nobody`):
//! the sandbox's user namespace maps only that user's uid and gid (each to itself), the
//! supplementary groups are cleared, and the command starts with no capability and
//! `no_new_privs`. An unprivileged launcher runs the command as itself, as it always did.

use nix::unistd::{Gid, Uid, User as PasswdUser, getegid, geteuid};

use crate::error::SandboxError;

/// The user a root launcher picks when `--as-user` is not given.
const DEFAULT_USER: &str = "nobody";
/// `nobody`'s ids where the system has no such entry (the kernel's overflow ids).
const NOBODY_ID: u32 = 65534;

/// An unprivileged user for the command, with the primary group it runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct User {
    /// The passwd name, or `None` for a uid without an entry.
    pub(crate) name: Option<String>,
    pub(crate) uid: Uid,
    pub(crate) gid: Gid,
}

/// Who the command runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Identity {
    /// An unprivileged launcher's own user (its uid, gid and groups); it can be nobody else.
    Caller,
    /// Host root, kept because `--as-user root` (or `0`) asked for it: the command may read
    /// and write every host file it can see.
    Root,
    /// A root launcher's command, as this unprivileged user.
    User(User),
}

impl Identity {
    /// Works out the identity from `--as-user` (a user name or a numeric uid).
    pub(crate) fn resolve(as_user: Option<&str>) -> Result<Self, SandboxError> {
        let root = geteuid().is_root();
        let wanted = match as_user {
            None if root => lookup(DEFAULT_USER)?.unwrap_or(User {
                name: Some(DEFAULT_USER.to_owned()),
                uid: Uid::from_raw(NOBODY_ID),
                gid: Gid::from_raw(NOBODY_ID),
            }),
            None => return Ok(Self::Caller),
            Some(spec) => lookup(spec)?
                .ok_or_else(|| SandboxError::AsUser(format!("{spec:?}: no such user")))?,
        };
        match (root, wanted.uid.is_root()) {
            (true, true) => Ok(Self::Root),
            (true, false) => {
                let who = Self::User(wanted);
                who.switchable_here()?;
                Ok(who)
            }
            (false, _) if wanted.uid == geteuid() => Ok(Self::Caller),
            (false, _) => Err(SandboxError::AsUser(format!(
                "{:?} needs a root launcher (this one runs as uid {} and can only run the \
                 command as itself)",
                as_user.unwrap_or_default(),
                geteuid()
            ))),
        }
    }

    /// Fails where this root launcher's own user namespace cannot switch to the user: one that
    /// does not map its ids, or denies `setgroups` (as `unshare --map-root-user` leaves it), so
    /// that the launcher's groups could not be dropped.
    fn switchable_here(&self) -> Result<(), SandboxError> {
        let (uid, gid) = self.ids();
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let maps = |map: &str, id: u32| {
            map.lines().any(|line| {
                let fields: Vec<u64> = line
                    .split_whitespace()
                    .filter_map(|f| f.parse().ok())
                    .collect();
                matches!(fields[..], [first, _, count] if (first..first + count).contains(&u64::from(id)))
            })
        };
        let hint = "--as-user root runs the command as the launcher itself";
        if !maps(&read("/proc/self/uid_map"), uid.as_raw())
            || !maps(&read("/proc/self/gid_map"), gid.as_raw())
        {
            return Err(SandboxError::AsUser(format!(
                "{}: the launcher's user namespace does not map its ids ({hint})",
                self.describe()
            )));
        }
        if read("/proc/self/setgroups").trim() == "deny" {
            return Err(SandboxError::AsUser(format!(
                "{}: the launcher's user namespace denies setgroups, so the launcher's groups \
                 could not be dropped ({hint})",
                self.describe()
            )));
        }
        Ok(())
    }

    /// The host uid and primary gid the command runs with.
    pub(crate) fn ids(&self) -> (Uid, Gid) {
        match self {
            Self::Caller => (geteuid(), getegid()),
            Self::Root => (Uid::from_raw(0), Gid::from_raw(0)),
            Self::User(user) => (user.uid, user.gid),
        }
    }

    /// How messages name it: `nobody (uid 65534)`, `uid 4242`.
    pub(crate) fn describe(&self) -> String {
        let (uid, _) = self.ids();
        match self {
            Self::User(User {
                name: Some(name), ..
            }) => format!("{name} (uid {uid})"),
            Self::User(User { name: None, .. }) => format!("uid {uid}"),
            Self::Root => "root (uid 0)".to_owned(),
            Self::Caller => format!("uid {uid} (the launcher's own user)"),
        }
    }

    /// Becomes the command's user, for good: clears the supplementary groups, sets every gid
    /// and uid, forbids gaining privileges through set-uid programs or file capabilities, and
    /// stays non-dumpable. Nothing to do for [`Identity::Caller`] and [`Identity::Root`].
    ///
    /// In the sandbox's user namespace (where this user's ids are mapped to themselves) it
    /// also drops every capability at the command's `exec`: the user is not that namespace's
    /// uid 0, and nothing is ambient.
    pub(crate) fn assume(&self) -> Result<(), String> {
        let Self::User(user) = self else {
            return Ok(());
        };
        let failed =
            |what: &str, e: nix::Error| format!("becoming {}: {what}: {e}", self.describe());
        nix::unistd::setgroups(&[]).map_err(|e| failed("setgroups", e))?;
        nix::unistd::setresgid(user.gid, user.gid, user.gid).map_err(|e| failed("setresgid", e))?;
        nix::unistd::setresuid(user.uid, user.uid, user.uid).map_err(|e| failed("setresuid", e))?;
        nix::sys::prctl::set_no_new_privs().map_err(|e| failed("no_new_privs", e))?;
        nix::sys::prctl::set_dumpable(false).map_err(|e| failed("prctl(PR_SET_DUMPABLE)", e))
    }
}

/// A passwd entry by name, or by uid for a number (a uid without an entry runs with the gid
/// of the same number). `Ok(None)`: no such user name.
fn lookup(spec: &str) -> Result<Option<User>, SandboxError> {
    let failed = |e: nix::Error| SandboxError::AsUser(format!("{spec:?}: reading passwd: {e}"));
    let entry = |p: PasswdUser| User {
        name: Some(p.name),
        uid: p.uid,
        gid: p.gid,
    };
    if !spec.is_empty() && spec.bytes().all(|b| b.is_ascii_digit()) {
        let Ok(raw) = spec.parse::<u32>() else {
            return Ok(None);
        };
        let uid = Uid::from_raw(raw);
        return Ok(Some(PasswdUser::from_uid(uid).map_err(failed)?.map_or(
            User {
                name: None,
                uid,
                gid: Gid::from_raw(raw),
            },
            entry,
        )));
    }
    Ok(PasswdUser::from_name(spec).map_err(failed)?.map(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_a_uid_with_its_own_gid_unless_passwd_names_it() {
        let odd = lookup("4242424").ok().flatten();
        assert_eq!(
            odd,
            Some(User {
                name: None,
                uid: Uid::from_raw(4_242_424),
                gid: Gid::from_raw(4_242_424),
            })
        );
        let root = lookup("0").ok().flatten().map(|u| (u.uid, u.gid));
        assert_eq!(root, Some((Uid::from_raw(0), Gid::from_raw(0))));
        assert_eq!(lookup("99999999999").ok().flatten(), None, "beyond u32");
        assert_eq!(lookup("egressgate-no-such-user").ok().flatten(), None);
    }
}
