//! The access level check, the one place the forwarding path asks whether a request's method
//! is within what its grant opens. `read` means downloads: `GET`, `HEAD`, `OPTIONS`, and for
//! git's smart HTTP protocol fetch and clone (`git-upload-pack`) but never push
//! (`git-receive-pack`, whose discovery is a `GET`).

use egressgate_store::Access;
use http::{Method, Uri};

/// Whether `access` allows a request with this method and URI.
pub(crate) fn permits(access: Access, method: &Method, uri: &Uri) -> bool {
    match access {
        Access::Full => true,
        Access::Read => read_permits(method, uri),
    }
}

fn read_permits(method: &Method, uri: &Uri) -> bool {
    let path = uri.path();
    if *method == Method::GET || *method == Method::HEAD || *method == Method::OPTIONS {
        // `git push` starts with `GET …/info/refs?service=git-receive-pack`: refusing it there
        // makes git report the 403 before it packs anything.
        let receive_pack = path.ends_with("/info/refs")
            && uri
                .query()
                .unwrap_or("")
                .split('&')
                .any(|kv| kv.eq_ignore_ascii_case("service=git-receive-pack"));
        return !receive_pack;
    }
    // Fetch and clone post their wants to `…/git-upload-pack`; nothing is uploaded but them.
    *method == Method::POST && path.ends_with("/git-upload-pack")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(access: Access, method: &str, uri: &str) -> bool {
        let m = Method::from_bytes(method.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        let u: Uri = uri.parse().unwrap_or_else(|e| unreachable!("{e}"));
        permits(access, &m, &u)
    }

    #[test]
    fn read_is_downloads_and_git_fetch_only() {
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert!(ok(Access::Read, m, "/simple/requests/"), "{m}");
        }
        for m in ["POST", "PUT", "DELETE", "PATCH", "PROPFIND"] {
            assert!(!ok(Access::Read, m, "/upload"), "{m}");
        }
        assert!(ok(
            Access::Read,
            "GET",
            "/r.git/info/refs?service=git-upload-pack"
        ));
        assert!(ok(Access::Read, "POST", "/r.git/git-upload-pack"));
        assert!(!ok(
            Access::Read,
            "GET",
            "/r.git/info/refs?service=git-receive-pack"
        ));
        assert!(!ok(
            Access::Read,
            "GET",
            "/r.git/info/refs?x=1&service=GIT-RECEIVE-PACK"
        ));
        assert!(!ok(Access::Read, "POST", "/r.git/git-receive-pack"));
        assert!(!ok(
            Access::Read,
            "POST",
            "/r.git/git-upload-pack/../git-receive-pack"
        ));
        for m in ["GET", "POST", "PUT", "DELETE"] {
            assert!(ok(Access::Full, m, "/r.git/git-receive-pack"), "{m}");
        }
    }
}
