//! Builds the command's environment: the gate's secrets removed, every proxy setting pointed
//! at the proxy (through the forwarder when isolated).

use std::ffi::{OsStr, OsString};

/// Variables set to the proxy URL: curl, wget, Python, Go, git and pip read the `*_proxy`
/// family (pip through `HTTP(S)_PROXY`, and `PIP_PROXY` for its `--proxy`); npm reads
/// `npm_config_proxy` and `npm_config_https_proxy`.
const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "PIP_PROXY",
    "npm_config_proxy",
    "npm_config_https_proxy",
];

/// Variables set empty, so that no host (not even loopback) bypasses the proxy.
const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy", "npm_config_noproxy"];

/// The gate's own settings; they may hold database passwords and signing keys.
const SECRET_PREFIX: &str = "EGRESSGATE_";
/// The database connection string the gate reads.
const SECRET_VARS: &[&str] = &["DATABASE_URL"];

/// The environment for the command: `parent` minus the gate's secrets and any earlier proxy
/// setting (in any letter case, since npm and Windows-minded tools ignore case), plus the
/// proxy variables pointing at `proxy_url`, and with a CA `bundle` the trust variables
/// pointing at it (replacing the parent's).
pub(crate) fn command_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    proxy_url: &str,
    bundle: Option<&std::path::Path>,
) -> Vec<(OsString, OsString)> {
    let replaced = |name: &OsStr| {
        bundle.is_some()
            && name.to_str().is_some_and(|n| {
                crate::trust::TRUST_VARS
                    .iter()
                    .any(|v| v.eq_ignore_ascii_case(n))
            })
    };
    let mut env: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(name, _)| keeps(name) && !replaced(name))
        .collect();
    if let Some(b) = bundle {
        env.extend(crate::trust::vars(b));
    }
    env.extend(
        PROXY_VARS
            .iter()
            .map(|name| ((*name).into(), proxy_url.into())),
    );
    env.extend(
        NO_PROXY_VARS
            .iter()
            .map(|name| ((*name).into(), OsString::new())),
    );
    env
}

/// Whether a variable of the launcher's environment is passed on.
fn keeps(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        // Not UTF-8, so not one of ours; pass it through untouched.
        return true;
    };
    let upper = name.to_ascii_uppercase();
    let ours = |list: &[&str]| list.iter().any(|v| v.eq_ignore_ascii_case(name));
    !(upper.starts_with(SECRET_PREFIX)
        || ours(SECRET_VARS)
        || ours(PROXY_VARS)
        || ours(NO_PROXY_VARS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Vec<&'a OsString> {
        env.iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .collect()
    }

    #[test]
    fn removes_secrets_and_old_proxies_and_sets_every_proxy_variable_once() {
        let env = command_env(
            pairs(&[
                ("PATH", "/usr/bin"),
                ("EGRESSGATE_DATABASE_URL", "postgres://x"),
                ("egressgate_token", "t"),
                ("DATABASE_URL", "sqlite://x"),
                ("Http_Proxy", "http://elsewhere:1"),
                ("NPM_CONFIG_PROXY", "http://elsewhere:1"),
                ("no_proxy", "*"),
                ("HOME", "/root"),
            ]),
            "http://t:s@127.0.0.1:9",
            None,
        );
        assert_eq!(get(&env, "PATH"), ["/usr/bin"]);
        assert_eq!(get(&env, "HOME"), ["/root"]);
        for name in [
            "EGRESSGATE_DATABASE_URL",
            "egressgate_token",
            "DATABASE_URL",
        ] {
            assert!(get(&env, name).is_empty(), "{name} kept");
        }
        assert!(get(&env, "Http_Proxy").is_empty());
        assert!(get(&env, "NPM_CONFIG_PROXY").is_empty());
        for name in PROXY_VARS {
            assert_eq!(get(&env, name), ["http://t:s@127.0.0.1:9"], "{name}");
        }
        for name in NO_PROXY_VARS {
            assert_eq!(get(&env, name), [""], "{name}");
        }
    }

    #[test]
    fn a_bundle_replaces_every_trust_variable_once() {
        let env = command_env(
            pairs(&[
                ("ssl_cert_file", "/elsewhere.pem"),
                ("GIT_SSL_CAINFO", "/x"),
            ]),
            "http://t:s@127.0.0.1:9",
            Some(std::path::Path::new("/tmp/b/ca-bundle.pem")),
        );
        for v in crate::trust::TRUST_VARS {
            assert_eq!(get(&env, v), ["/tmp/b/ca-bundle.pem"], "{v}");
        }
        assert!(get(&env, "ssl_cert_file").is_empty(), "the old one is gone");
        let plain = command_env(
            pairs(&[("SSL_CERT_FILE", "/mine.pem")]),
            "http://x:y@h:1",
            None,
        );
        assert_eq!(
            get(&plain, "SSL_CERT_FILE"),
            ["/mine.pem"],
            "left alone without a bundle"
        );
    }
}
