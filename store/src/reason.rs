//! The closed set of refusal reasons: the proxy's vocabulary, the refusal record's key and the
//! approval tool's input, so all three agree.

use crate::spelling::spelling;

/// Why the proxy refused a request. Only [`RefusalReason::NotApproved`],
/// [`RefusalReason::MethodNotAllowed`], [`RefusalReason::PathNotAllowed`] and
/// [`RefusalReason::PackageNotApproved`] can be fixed by a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// Nobody approved this host.
    NotApproved,
    /// The name is an address in some spelling.
    IpLiteral,
    /// The name only makes sense inside a network.
    InternalName,
    /// The port is not on the allow list.
    PortNotAllowed,
    /// DNS pointed at an address that is not public unicast.
    PrivateAddress,
    /// The TLS SNI named another host than the CONNECT target (domain fronting).
    SniMismatch,
    /// The `Host` header named another host than the request URI.
    HostMismatch,
    /// A connection or rate limit was exceeded.
    LimitExceeded,
    /// The host is allowed only at an access level (`read`) that does not cover this request's
    /// method (an upload, a `git push`); a person may grant `full`.
    MethodNotAllowed,
    /// The host is allowed only under some path prefixes, and this request's path (in its
    /// normal form) lies under none of them, or has no normal form; a person may grant more.
    PathNotAllowed,
    /// A package registry request for a package nobody approved (or a version outside its
    /// pin), or one that names no package the proxy can tell (then not approvable).
    PackageNotApproved,
}

spelling!(RefusalReason {
    NotApproved => "not_approved",
    IpLiteral => "ip_literal",
    InternalName => "internal_name",
    PortNotAllowed => "port_not_allowed",
    PrivateAddress => "private_address",
    SniMismatch => "sni_mismatch",
    HostMismatch => "host_mismatch",
    LimitExceeded => "limit_exceeded",
    MethodNotAllowed => "method_not_allowed",
    PathNotAllowed => "path_not_allowed",
    PackageNotApproved => "package_not_approved",
});

impl RefusalReason {
    /// Whether shadow mode may let a request through despite this reason. Policy reasons
    /// (what is approved, which ports, which methods) can be shadowed; reasons that protect the network or
    /// the proxy itself never are: an address in disguise (`ip_literal`), an internal name or
    /// address (`internal_name`, `private_address`), domain fronting (`sni_mismatch`,
    /// `host_mismatch`) and the connection limits (`limit_exceeded`).
    pub fn shadowable(self) -> bool {
        matches!(
            self,
            Self::NotApproved
                | Self::PortNotAllowed
                | Self::MethodNotAllowed
                | Self::PathNotAllowed
                | Self::PackageNotApproved
        )
    }

    /// Whether a person's approval can make this request succeed (a package refusal only
    /// when it names a package: see the refusal record's `approvable`).
    pub fn approvable(self) -> bool {
        matches!(
            self,
            Self::NotApproved
                | Self::MethodNotAllowed
                | Self::PathNotAllowed
                | Self::PackageNotApproved
        )
    }

    /// Whether one recorded refusal can be approved: a package refusal only when it names the
    /// package (a registry request the proxy could not map names nothing to approve).
    pub fn approvable_for(self, names_package: bool) -> bool {
        self.approvable() && (self != Self::PackageNotApproved || names_package)
    }
}
